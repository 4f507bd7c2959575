package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserBinding is a RoleBinding named name in namespace that gives user
// the rights of role, a "Role" or a "ClusterRole" (roleKind).
func UserBinding(namespace, name, roleKind, role, user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}

// Access is one SubjectAccessReview: may the user do Verb on Resource
// ("group/resource[/subresource]", "" for the core group), named Name, in
// Namespace ("" is cluster-wide)? Allowed is the answer wanted.
type Access struct {
	Verb, Resource, Namespace, Name string
	Allowed                         bool
}

// CheckAccess asks the API server each question about user, waiting for
// RBAC to see roles and bindings made just before (the authorizer watches
// them, and kube-controller-manager fills in aggregated roles).
func (t *T) CheckAccess(user string, want []Access) {
	t.Helper()
	for _, w := range want {
		group, res, _ := strings.Cut(w.Resource, "/")
		res, sub, _ := strings.Cut(res, "/")
		what := fmt.Sprintf("%s %s %s name=%q namespace=%q", user, w.Verb, w.Resource, w.Name, w.Namespace)
		t.Eventually(30*time.Second, fmt.Sprintf("%s: allowed=%v", what, w.Allowed), func() (bool, string) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: w.Namespace, Verb: w.Verb, Group: group, Resource: res, Subresource: sub, Name: w.Name,
				},
			}}
			if err := t.Env.Kube.Create(context.Background(), review); err != nil {
				return false, err.Error()
			}
			return review.Status.Allowed == w.Allowed, fmt.Sprintf("allowed=%v %s", review.Status.Allowed, review.Status.Reason)
		})
	}
}

// Allow is an Access the user must have.
func Allow(verb, resource, namespace, name string) Access {
	return Access{Verb: verb, Resource: resource, Namespace: namespace, Name: name, Allowed: true}
}

// Deny is an Access the user must not have.
func Deny(verb, resource, namespace, name string) Access {
	return Access{Verb: verb, Resource: resource, Namespace: namespace, Name: name}
}
