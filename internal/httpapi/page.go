package httpapi

import (
	_ "embed"
	"html/template"
	"net/http"
	"time"
)

//go:embed page.html
var pageSource string

// pageTemplate is parsed once per handler; the template is static text, so a
// parse error is a build defect that the tests catch.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"millis": func(t *time.Time) int64 {
		if t == nil {
			return 0
		}
		return t.UnixMilli()
	},
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"badge": func(l Leadership) string {
		switch {
		case l.Leader && l.State == StateLeading:
			return "leader"
		case l.Leader:
			return string(l.State)
		}
		return "standby"
	},
	// stateText tells a leader that takes commands from one that holds
	// the lease and cannot take them yet.
	"stateText": func(l Leadership) string {
		switch {
		case l.Leader && l.State == StateLeading:
			return "leader"
		case l.Leader:
			return "leader, " + string(l.State)
		}
		return "standby"
	},
}).Parse(pageSource))

// PageRecentLimit is the number of commands the status page shows.
const PageRecentLimit = 20

type pageData struct {
	Leadership Leadership
	Recent     []CommandState
	RenderedAt time.Time
}

// page renders the status page. The server fills it, so it reads without
// scripts; a small script then refreshes it every second from the JSON API
// and counts the lease down between refreshes.
func (s *server) page(w http.ResponseWriter, _ *http.Request) {
	data := pageData{
		Leadership: s.backend.Leadership(),
		Recent:     s.backend.Recent(PageRecentLimit),
		RenderedAt: time.Now(),
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTemplate.Execute(w, data); err != nil {
		s.opts.Logger.Warn("httpapi: render the status page", "err", err)
	}
}
