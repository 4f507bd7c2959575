package ownedresource

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// rbacGroup holds the kinds no copy may ever be: whoever writes a
// TemporalWorkerOwnedResource would bind roles through the controller that
// Kubernetes' escalate and bind checks only check against the controller.
const rbacGroup = "rbac.authorization.k8s.io"

// DefaultBannedKinds are the kinds no copy may be unless the manager is
// told otherwise (--owned-resource-banned-kinds, for the webhook and the
// controller): objects that run pods of their own, which would run once
// per worker version beside the versioned Deployments.
var DefaultBannedKinds = []string{"Deployment", "StatefulSet", "Job", "Pod", "CronJob"}

// RBACKinds are always banned, whatever the configured list says.
var RBACKinds = []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

// BannedKind says why a copy may not be of kind gk, or "" when it may:
// an RBAC kind (always), or a kind of the configured list, compared by
// kind in any group without regard to case.
func BannedKind(gk schema.GroupKind, banned []string) string {
	if gk.Group == rbacGroup && slices.Contains(RBACKinds, gk.Kind) {
		return fmt.Sprintf("%s objects (%s) cannot be attached to worker versions: RBAC kinds are always banned, since their author would bind roles with the controller's rights", gk.Kind, rbacGroup)
	}
	if slices.ContainsFunc(banned, func(b string) bool { return strings.EqualFold(b, gk.Kind) }) {
		return fmt.Sprintf("%s objects cannot be attached to worker versions (banned kinds: %s)", gk.Kind, strings.Join(banned, ", "))
	}
	return ""
}
