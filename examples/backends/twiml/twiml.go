// Package twiml is a small Twilio SMS app of the kind whguard's sync mode
// is for: Twilio posts an incoming message as a form and executes the
// TwiML of the response, so the answer is the app's reply to the texter.
// It knows nothing of whguard. Calls counts the webhooks it has handled,
// so a test or the demo can see that a duplicate never reached it.
package twiml

import (
	"encoding/xml"
	"net/http"
	"strings"
	"sync/atomic"
)

// App answers Twilio SMS webhooks with TwiML.
type App struct {
	// Prefix starts every reply ("You said: " when empty); changing it
	// while running makes a new answer tell itself from a stored one.
	prefix atomic.Pointer[string]
	calls  atomic.Int64
}

// New returns an App whose replies start with "You said: ".
func New() *App {
	a := &App{}
	a.SetPrefix("You said: ")
	return a
}

// SetPrefix changes what later replies start with.
func (a *App) SetPrefix(p string) { a.prefix.Store(&p) }

// Calls is how many webhooks the app has handled.
func (a *App) Calls() int64 { return a.calls.Load() }

type response struct {
	XMLName xml.Name `xml:"Response"`
	Message string   `xml:"Message"`
}

// ServeHTTP answers a POSTed SMS (From, Body, …) with
// <Response><Message>…</Message></Response>.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	a.calls.Add(1)
	out, err := xml.Marshal(response{Message: *a.prefix.Load() + strings.TrimSpace(r.PostForm.Get("Body"))})
	if err != nil {
		http.Error(w, "cannot encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write(append([]byte(xml.Header), out...))
}
