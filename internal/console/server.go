package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/outflowhq/outflow/internal/dynamo"
	"github.com/outflowhq/outflow/internal/outbox"
)

//go:embed assets templates
var files embed.FS

// DefaultRefresh is how often the overview reloads itself. Each reload
// makes the count queries of outflow stats --blocked, 2 per shard plus 1
// per shard for the oldest due row, 1 per dead queue and the audit item:
// 15 DynamoDB requests a reload at 4 shards and 2 routes, so one open tab
// costs 15 requests a minute, less than a sweep every minute makes. The
// charts are cached for their 5-minute period (see metricsTTL).
const DefaultRefresh = time.Minute

// MinRefresh is the fastest refresh allowed: 4 reloads a minute.
const MinRefresh = 15 * time.Second

// Config is what a console serves and how.
type Config struct {
	Operator *dynamo.Operator
	// Ordered reads the dispatcher's ordered routes and their dead-head
	// policies, as the CLI does (flag, environment, else published),
	// for each page that says which dead letters block their group.
	Ordered func(context.Context) (map[string]outbox.DeadHead, error)
	// UnsureWait reads the unsure wait the dispatcher published (zero:
	// none), which a purge holds a dead letter for after a send of it ended
	// unsure (operate.HoldWait); nil means none.
	UnsureWait func(context.Context) (time.Duration, error)
	// DeadQueues and Cap are the dead queues the overview counts and the
	// cap on each count, as outflow stats takes them.
	DeadQueues []string
	Cap        int
	// Metrics reads the stack's CloudWatch metrics for the overview's
	// charts; nil leaves them out with a note.
	Metrics *Metrics
	// Addr is the host:port the console is bound to: requests must name it
	// (AllowedHosts).
	Addr string
	// Token, if set, is the access token every request must carry (a
	// console bound beyond loopback).
	Token string
	// CSRF is the token every POST must carry; New draws one if empty.
	CSRF     string
	ReadOnly bool
	Refresh  time.Duration
	Log      *slog.Logger
	Now      func() time.Time
}

// Server is the console's HTTP handler.
type Server struct {
	cfg     Config
	hosts   []string
	csrf    string
	pages   map[string]*template.Template
	handler http.Handler
	charts  chartCache
}

// New returns the console for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Operator == nil || cfg.Ordered == nil {
		return nil, errors.New("console: an operator and its ordered routes are required")
	}
	if cfg.Addr == "" {
		return nil, errors.New("console: no bound address")
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	if cfg.Refresh < MinRefresh {
		return nil, fmt.Errorf("console: refresh %s is faster than %s", cfg.Refresh, MinRefresh)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, hosts: AllowedHosts(cfg.Addr), csrf: cfg.CSRF}
	if s.csrf == "" {
		s.csrf = NewToken()
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /dead", s.deadList)
	mux.HandleFunc("GET /row", s.row)
	mux.HandleFunc("GET /groups", s.groups)
	mux.HandleFunc("POST /redrive", s.redrive)
	mux.HandleFunc("POST /purge", s.purge)
	s.handler = s.logged(s.secure(mux))
	return s, nil
}

// ServeHTTP serves the console.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// CSRF is the token a POST must carry.
func (s *Server) CSRF() string { return s.csrf }

// parsePages parses each page with the layout, once.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "dead", "row", "groups", "result", "confirm", "refused", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// page is what every page's layout reads.
type page struct {
	Title    string
	Nav      string
	Table    string
	ReadOnly bool
	CSRF     string
	// Refresh, in seconds, reloads the page (the overview only).
	Refresh int
	Data    any
}

// render writes the page, whole or not at all: a template that fails
// halfway sends an error page rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Nav: name, Table: s.cfg.Operator.Table(), ReadOnly: s.cfg.ReadOnly, CSRF: s.csrf, Data: data}
	if name == "overview" {
		p.Refresh = int(s.cfg.Refresh / time.Second)
	}
	var buf bytes.Buffer
	if err := s.pages[name].Execute(&buf, p); err != nil {
		s.cfg.Log.ErrorContext(r.Context(), "console: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// refuse answers a request the console's rules refuse.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	s.render(w, r, status, "refused", "Refused", why)
}

// fail answers a request that failed on the table's side, naming the
// error (DynamoDB's errors name keys and tables, never payloads).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.cfg.Log.ErrorContext(r.Context(), "console: "+what, "error", err)
	s.render(w, r, http.StatusBadGateway, "error", "Error", fmt.Sprintf("%s: %v", what, err))
}

// statusWriter remembers the status a handler wrote, for the log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// logged logs each request's method, path and status: never its query or
// form, which hold keys and the access token, nor any response body,
// which may hold a payload.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(sw, r)
		s.cfg.Log.InfoContext(r.Context(), "console request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"duration_ms", time.Since(start).Milliseconds())
	})
}
