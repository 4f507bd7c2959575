package admission

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KindResolver maps a kind to its resource and scope; the manager's
// RESTMapper is one, discovering kinds installed after it started.
type KindResolver interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
}

// AccessReviewer answers whether someone may do something: the API
// server's SubjectAccessReview.
type AccessReviewer interface {
	Review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error)
}

// Identity is a user as the authorizer sees it.
type Identity struct {
	Username string
	Groups   []string
	UID      string
	Extra    map[string]authorizationv1.ExtraValue
}

// IdentityFunc returns the controller's identity.
type IdentityFunc func(ctx context.Context) (Identity, error)

// ServiceAccountIdentity is the identity a service account authenticates
// as: its username and the groups the API server gives it.
func ServiceAccountIdentity(namespace, name string) Identity {
	return Identity{
		Username: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// StaticIdentity always returns id.
func StaticIdentity(id Identity) IdentityFunc {
	return func(context.Context) (Identity, error) { return id, nil }
}

// SelfIdentity asks the API server, once it answers, who c authenticates
// as (a SelfSubjectReview, allowed to every authenticated user).
func SelfIdentity(c client.Client) IdentityFunc {
	var (
		mu    sync.Mutex
		known *Identity
	)
	return func(ctx context.Context) (Identity, error) {
		mu.Lock()
		defer mu.Unlock()
		if known != nil {
			return *known, nil
		}
		review := &authenticationv1.SelfSubjectReview{}
		if err := c.Create(ctx, review); err != nil {
			return Identity{}, fmt.Errorf("ask the API server who the controller is (SelfSubjectReview): %w", err)
		}
		u := review.Status.UserInfo
		known = &Identity{Username: u.Username, Groups: u.Groups}
		return *known, nil
	}
}

// ClientReviewer creates SubjectAccessReviews with c.
type ClientReviewer struct{ Client client.Client }

// Review implements AccessReviewer.
func (r ClientReviewer) Review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: spec}
	if err := r.Client.Create(ctx, sar); err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return sar.Status, nil
}

// denial says who may not do what; nil when every verb is allowed.
type denial struct {
	who, verb string
	resource  schema.GroupVersionResource
	// name is the object's, empty for any of the resource.
	name      string
	namespace string
	reason    string
}

func (d *denial) Error() string {
	what := d.resource.GroupResource().String()
	if d.name != "" {
		what += fmt.Sprintf(" %q", d.name)
	}
	msg := fmt.Sprintf("%s may not %s %s in namespace %q", d.who, d.verb, what, d.namespace)
	if d.reason != "" {
		msg += " (" + d.reason + ")"
	}
	return msg
}

// allowed reviews each verb on resource in namespace for id, stopping at
// the first denial. who names id in the denial.
func allowed(ctx context.Context, r AccessReviewer, id Identity, who string, resource schema.GroupVersionResource, namespace string, verbs ...string) (*denial, error) {
	for _, verb := range verbs {
		if d, err := allowedOn(ctx, r, id, who, resource, namespace, "", verb); d != nil || err != nil {
			return d, err
		}
	}
	return nil, nil
}

// allowedOn reviews verb on the object name of resource in namespace (any
// object of it when name is empty) for id.
func allowedOn(ctx context.Context, r AccessReviewer, id Identity, who string, resource schema.GroupVersionResource, namespace, name, verb string) (*denial, error) {
	status, err := r.Review(ctx, authorizationv1.SubjectAccessReviewSpec{
		User: id.Username, Groups: id.Groups, UID: id.UID, Extra: id.Extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Name: name,
			Group: resource.Group, Version: resource.Version, Resource: resource.Resource,
		},
	})
	if err != nil {
		return nil, err
	}
	if !status.Allowed || status.Denied {
		return &denial{who: who, verb: verb, resource: resource, name: name, namespace: namespace,
			reason: strings.TrimSpace(status.Reason + " " + status.EvaluationError)}, nil
	}
	return nil, nil
}

// requester is the identity of an admission request's user.
func requester(u authenticationv1.UserInfo) Identity {
	id := Identity{Username: u.Username, Groups: u.Groups, UID: u.UID}
	if len(u.Extra) > 0 {
		id.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			id.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	return id
}
