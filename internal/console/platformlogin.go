package console

import (
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// PlatformTokenField is the platform view's sign-in field: a token of the
// platform cluster, checked there.
const PlatformTokenField = "platform_token"

// A platform cluster of its own has its own token issuer: a token of the
// onboarding cluster is no identity there, nor the reverse. So the
// platform view takes a second sign-in, with a token the platform cluster
// accepts, kept in the session next to the onboarding one and used for
// the platform view alone. Neither token is ever sent to the other
// cluster as its user, and the two identities are shown apart.

// platformIdentity is a session's sign-in to a separate platform cluster.
type platformIdentity struct {
	user   string
	client dynamic.Interface
}

// setPlatform records the session's platform sign-in (nil: none).
func (s *session) setPlatform(p *platformIdentity) {
	s.mu.Lock()
	s.platform = p
	s.mu.Unlock()
}

// platformOf returns the session's platform sign-in, or nil.
func (s *session) platformOf() *platformIdentity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.platform
}

// platformSeparate reports whether the platform view reads a cluster other
// than the onboarding cluster.
func (s *Server) platformSeparate() bool {
	return s.opts.Platform.Server != s.opts.Onboarding.Server
}

// platformClient is the client of the platform view: the platform
// sign-in's when there is one, else the user's token (one cluster for
// both roles, or clusters that trust the same issuer).
func (s *Server) platformClient(sess *session) (dynamic.Interface, string) {
	if p := sess.platformOf(); p != nil {
		return p.client, p.user
	}
	return sess.kube.platform, ""
}

// platformLogin checks a token with the platform cluster
// (SelfSubjectReview there) and keeps it in the session for the platform
// view. The token is neither logged nor echoed.
func (s *Server) platformLogin(w http.ResponseWriter, r *http.Request, sess *session) {
	if !s.platformSeparate() {
		http.Redirect(w, r, "/platform", http.StatusSeeOther)
		return
	}
	token, err := tokenOf(strings.TrimSpace(r.PostForm.Get(PlatformTokenField)), "")
	if err != nil {
		s.renderPlatform(w, r, sess, http.StatusBadRequest, err.Error())
		return
	}
	cfg := restConfig(s.opts.Platform, token)
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.log.Error(err, "create clients for the platform cluster")
		s.renderPlatform(w, r, sess, http.StatusInternalServerError, "The console cannot reach the platform cluster.")
		return
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		s.log.Error(err, "create clients for the platform cluster")
		s.renderPlatform(w, r, sess, http.StatusInternalServerError, "The console cannot reach the platform cluster.")
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	review, err := core.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		e := describeError("sign in to the platform cluster", err)
		msg := e.Message
		if e.Status == http.StatusUnauthorized {
			msg = "The platform cluster does not accept this token."
		}
		s.log.V(1).Info("platform sign-in refused", "user", sess.user, "status", e.Status)
		s.renderPlatform(w, r, sess, e.Status, msg)
		return
	}
	user := review.Status.UserInfo.Username
	sess.setPlatform(&platformIdentity{user: user, client: dyn})
	s.log.Info("signed in to the platform cluster", "user", sess.user, "platformUser", user)
	http.Redirect(w, r, "/platform", http.StatusSeeOther)
}

// platformLogout ends the session's platform sign-in; the console sign-in
// stays.
func (s *Server) platformLogout(w http.ResponseWriter, r *http.Request, sess *session) {
	if p := sess.platformOf(); p != nil {
		s.log.Info("signed out of the platform cluster", "user", sess.user, "platformUser", p.user)
	}
	sess.setPlatform(nil)
	http.Redirect(w, r, "/platform", http.StatusSeeOther)
}

// platformUnauthorized is the message of a platform section whose token
// the platform cluster does not accept.
func platformUnauthorized(separate bool) string {
	if separate {
		return "The platform cluster does not accept your token: sign in to it above."
	}
	return "The API server no longer accepts your token. Sign in again."
}
