package console

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// contentSecurityPolicy allows the console's own stylesheet and nothing
// else: no script at all, no frame, forms posted only to itself.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// maxForm bounds a POST's body.
const maxForm = 1 << 20

// tokenCookie holds the access token once a browser has shown it.
const tokenCookie = "outflow_console_token"

// NewToken returns a random token for an access token or a CSRF token.
func NewToken() string { return rand.Text() }

// AllowedHosts is the Host values a console bound at addr (host:port)
// accepts: the bound one, and for a loopback bind the loopback names of
// the same port (a browser opens http://localhost:PORT as readily).
// Anything else, such as a name an attacker's DNS points at 127.0.0.1,
// is refused.
func AllowedHosts(addr string) []string {
	hosts := []string{strings.ToLower(addr)}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return hosts
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "[::1]"} {
			if hp := h + ":" + port; hp != hosts[0] {
				hosts = append(hosts, hp)
			}
		}
	}
	return hosts
}

// secure wraps next with the console's defences, in order: headers on
// every response, the Host check, the access token (when one is set),
// then for a POST the read-only refusal, the Origin check and the CSRF
// token. Only POSTs change state, and GET handlers never do.
func (s *Server) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// the console's own form posts with Origin: null, which the Origin
		// check below must refuse.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !s.hostAllowed(r.Host) {
			s.refuse(w, r, http.StatusMisdirectedRequest, "This console answers only to "+s.hosts[0]+": the request named another host.")
			return
		}
		if s.cfg.Token != "" && !s.authorized(w, r) {
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			// A form names at most maxKeys keys: no request needs more.
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if s.cfg.ReadOnly {
				s.refuse(w, r, http.StatusForbidden, "This console is read-only (--read-only): it changes nothing.")
				return
			}
			if o := r.Header.Get("Origin"); o != "" && !s.sameOrigin(o) {
				s.refuse(w, r, http.StatusForbidden, "The request came from another origin.")
				return
			}
			if err := r.ParseForm(); err != nil {
				var tooLarge *http.MaxBytesError
				if errors.As(err, &tooLarge) {
					s.refuse(w, r, http.StatusRequestEntityTooLarge, "The request is larger than any form of this console.")
					return
				}
				s.refuse(w, r, http.StatusBadRequest, "The request's form cannot be read.")
				return
			}
			if !equal(r.PostFormValue("csrf"), s.csrf) {
				s.refuse(w, r, http.StatusForbidden, "The request carries no valid CSRF token: reload the page and try again.")
				return
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			s.refuse(w, r, http.StatusMethodNotAllowed, "Method Not Allowed.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	for _, h := range s.hosts {
		if host == h {
			return true
		}
	}
	return false
}

// sameOrigin reports whether an Origin header names this console.
func (s *Server) sameOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && s.hostAllowed(u.Host)
}

// authorized checks the access token: from the cookie, or from ?token= on
// a GET, which sets the cookie and redirects to the same page without it,
// so the token leaves the address bar and the history. It answers the
// request itself when it returns false.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if c, err := r.Cookie(tokenCookie); err == nil && equal(c.Value, s.cfg.Token) {
		return true
	}
	q := r.URL.Query()
	if r.Method == http.MethodGet && q.Has("token") && equal(q.Get("token"), s.cfg.Token) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return false
	}
	s.refuse(w, r, http.StatusUnauthorized, "This console needs its access token: open the URL it printed when it started.")
	return false
}

// equal compares secrets in constant time; an empty one never matches.
func equal(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
