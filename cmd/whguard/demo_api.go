package main

// How the demo reads what whguard did: the admin API, as a user would.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

func (d *demoRun) apiGet(path string, out any) error {
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (d *demoRun) listEvents(status string) []map[string]any {
	var v struct {
		Events []map[string]any `json:"events"`
	}
	_ = d.apiGet("/api/events?limit=500&status="+status, &v)
	return v.Events
}

func (d *demoRun) attemptsOf(eventID string) int {
	for _, e := range d.listEvents("") {
		if e["event_id"] == eventID {
			n, _ := e["attempts"].(float64)
			return int(n)
		}
	}
	return 0
}

// waitSettled polls until done and dead reach their expected counts.
func (d *demoRun) waitSettled(ctx context.Context, done, dead int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		if len(d.listEvents("done")) == done && len(d.listEvents("dead")) == dead {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
