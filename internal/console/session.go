package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// CookieName is the session cookie's name. Its value is a random session
// id; the token stays on the server.
const CookieName = "marketplane_console"

// CSRFField is the form field (and CSRFHeader the header, for fetch) that
// carries a session's CSRF token.
const (
	CSRFField  = "csrf"
	CSRFHeader = "X-CSRF-Token"
)

// session is one signed-in user. The token is the only credential the
// console ever holds, and only here.
type session struct {
	id        string
	csrf      string
	token     string
	user      string
	namespace string // the namespace last chosen, for defaults
	expires   time.Time
	kube      *kube
	platform  *platformIdentity // sign-in to a separate platform cluster
	mu        sync.Mutex
}

// Namespace returns the namespace the user last chose.
func (s *session) Namespace() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.namespace
}

func (s *session) setNamespace(ns string) {
	if ns == "" {
		return
	}
	s.mu.Lock()
	s.namespace = ns
	s.mu.Unlock()
}

// sessions is the in-memory session store. Sessions do not survive a
// restart: users sign in again, and no token is ever written to disk.
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

// randomString returns n random bytes, base64url-encoded.
func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// create stores a new session for token and returns it.
func (st *sessions) create(token, user, namespace string, k *kube) (*session, error) {
	id, err := randomString(32)
	if err != nil {
		return nil, err
	}
	csrf, err := randomString(32)
	if err != nil {
		return nil, err
	}
	s := &session{id: id, csrf: csrf, token: token, user: user, namespace: namespace, kube: k, expires: time.Now().Add(st.ttl)}
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	for k, old := range st.m { // drop expired sessions as new ones come
		if now.After(old.expires) {
			delete(st.m, k)
		}
	}
	st.m[id] = s
	return s, nil
}

// get returns the live session of id, or nil.
func (st *sessions) get(id string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.m[id]
	if !ok {
		return nil
	}
	if time.Now().After(s.expires) {
		delete(st.m, id)
		return nil
	}
	return s
}

func (st *sessions) remove(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.m, id)
}

// setCookie sets the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), Secure when the
// console is served over TLS (or says it is behind TLS), expiring with the
// session.
func setCookie(w http.ResponseWriter, r *http.Request, s *session, secure bool) {
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    s.id,
		Path:     "/",
		Expires:  s.expires,
		MaxAge:   int(time.Until(s.expires).Seconds()),
		HttpOnly: true,
		Secure:   secure || r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

func clearCookie(w http.ResponseWriter, r *http.Request, secure bool) {
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: secure || r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// sessionOf returns the request's live session, or nil.
func (s *Server) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	return s.sessions.get(c.Value)
}

// authed wraps a handler that needs a session: without one, a GET is sent
// to the login page and anything else refused (401). A state-changing
// request must carry the session's CSRF token (form field or header),
// else it is refused with 403 before the handler runs.
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := s.sessionOf(r)
		if sess == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "Not signed in.", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				http.Error(w, "The form could not be read.", http.StatusBadRequest)
				return
			}
			got := r.Header.Get(CSRFHeader)
			if got == "" {
				got = r.PostForm.Get(CSRFField)
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) != 1 {
				http.Error(w, "The form is stale or was not sent by the console (CSRF token missing or wrong). Reload the page and try again.", http.StatusForbidden)
				return
			}
		}
		h(w, r, sess)
	}
}
