package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// pages are the parsed templates: one set per page, each with the layout.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"login", "offerings", "offering", "instances", "instance", "platform", "confirm", "error"}

var funcs = template.FuncMap{
	"ago":   ago,
	"lower": strings.ToLower,
	"add":   func(a, b int) int { return a + b },
}

// ago says how long ago t was, to the second; "" for no time.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return time.Since(t).Round(time.Second).String()
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/fragments.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse page %s: %w", n, err)
		}
		p.byName[n] = t
	}
	live, err := template.New("fragments.html").Funcs(funcs).ParseFS(templateFS, "templates/fragments.html")
	if err != nil {
		return nil, fmt.Errorf("console: parse fragments: %w", err)
	}
	p.byName["fragments"] = live
	return p, nil
}

// view is what every page gets: its own data and the session's.
type view struct {
	Title     string
	User      string
	CSRF      string
	Namespace string
	Nav       string
	Flash     string
	Data      any
}

// render writes page name with status. Rendering goes to a buffer first so
// that a template error becomes a plain error, never half a page.
func (s *Server) render(w http.ResponseWriter, status int, name string, sess *session, nav, title string, data any) {
	v := view{Title: title, Nav: nav, Data: data}
	if sess != nil {
		v.User, v.CSRF, v.Namespace = sess.user, sess.csrf, sess.Namespace()
	}
	var buf bytes.Buffer
	if err := s.pages.byName[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		s.log.Error(err, "render page", "page", name)
		http.Error(w, "The console failed to render this page.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderFragment writes one named template of fragments.html.
func (s *Server) renderFragment(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := s.pages.byName["fragments"].ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error(err, "render fragment", "fragment", name)
		http.Error(w, "The console failed to render this part.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// showError renders an error page for an API error.
func (s *Server) showError(w http.ResponseWriter, r *http.Request, sess *session, e apiError) {
	if e.Status == http.StatusUnauthorized && sess != nil {
		s.sessions.remove(sess.id)
		clearCookie(w, r, s.opts.SecureCookies)
	}
	s.render(w, e.Status, "error", sess, "", e.Title, e)
}

// ctx bounds the API calls of one request.
func (s *Server) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.opts.RequestTimeout)
}

type loginData struct {
	Error string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.sessionOf(r) != nil {
		http.Redirect(w, r, "/offerings", http.StatusSeeOther)
		return
	}
	s.render(w, http.StatusOK, "login", nil, "", "Sign in", loginData{})
}

// login checks the pasted token (or a kubeconfig's) with the onboarding
// cluster and starts a session. The token is neither logged nor echoed.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		s.render(w, http.StatusBadRequest, "login", nil, "", "Sign in", loginData{Error: "The form could not be read."})
		return
	}
	token, err := tokenOf(strings.TrimSpace(r.PostForm.Get("token")), r.PostForm.Get("kubeconfig"))
	if err != nil {
		s.render(w, http.StatusBadRequest, "login", nil, "", "Sign in", loginData{Error: err.Error()})
		return
	}
	k, err := s.newKube(token)
	if err != nil {
		s.log.Error(err, "create clients")
		s.render(w, http.StatusInternalServerError, "login", nil, "", "Sign in", loginData{Error: "The console cannot reach the cluster."})
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	user, err := k.whoAmI(ctx)
	if err != nil {
		e := describeError("sign in", err)
		msg := e.Message
		if e.Status == http.StatusUnauthorized {
			msg = "The API server does not accept this token."
		}
		s.log.V(1).Info("sign-in refused", "status", e.Status)
		s.render(w, e.Status, "login", nil, "", "Sign in", loginData{Error: msg})
		return
	}
	sess, err := s.sessions.create(token, user, defaultNamespace(user), k)
	if err != nil {
		s.log.Error(err, "create session")
		s.render(w, http.StatusInternalServerError, "login", nil, "", "Sign in", loginData{Error: "The console could not start a session."})
		return
	}
	s.log.Info("signed in", "user", user)
	setCookie(w, r, sess, s.opts.SecureCookies)
	http.Redirect(w, r, "/offerings", http.StatusSeeOther)
}

// tokenOf returns the bearer token of the login form: the token field, or
// the token of the current context's user of a pasted kubeconfig. Other
// credentials (client certificates, exec plugins) cannot be used by a
// server on the user's behalf and are refused.
func tokenOf(token, kubeconfig string) (string, error) {
	if token != "" {
		if strings.ContainsAny(token, " \t\r\n") {
			return "", fmt.Errorf("a token is one word without spaces")
		}
		return token, nil
	}
	if strings.TrimSpace(kubeconfig) == "" {
		return "", fmt.Errorf("paste a bearer token or a kubeconfig that carries one")
	}
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return "", fmt.Errorf("the kubeconfig cannot be read")
	}
	ctxName := cfg.CurrentContext
	c, ok := cfg.Contexts[ctxName]
	if !ok {
		return "", fmt.Errorf("the kubeconfig has no current context")
	}
	u, ok := cfg.AuthInfos[c.AuthInfo]
	if !ok || u.Token == "" {
		return "", fmt.Errorf("the kubeconfig's current user has no token; the console signs in with bearer tokens only")
	}
	return u.Token, nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, sess *session) {
	s.sessions.remove(sess.id)
	clearCookie(w, r, s.opts.SecureCookies)
	s.log.Info("signed out", "user", sess.user)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
