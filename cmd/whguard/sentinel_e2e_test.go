package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sentinelSet is a Redis master, its replica and three Sentinels watching
// them, each a real process on a loopback port.
type sentinelSet struct {
	t         *testing.T
	master    *throwawayRedis
	replica   *proc
	replAddr  string
	sentinels []string
}

const sentinelMaster = "whguard-test"

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	s := &sentinelSet{t: t, master: startRedis(t), replAddr: freePort(t)}
	mhost, mport, _ := strings.Cut(s.master.addr, ":")
	rhost, rport, _ := strings.Cut(s.replAddr, ":")
	s.replica = start(t, "redis-server", nil, "--bind", rhost, "--port", rport, "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--replicaof", mhost, mport)
	waitFor(t, 10*time.Second, "the replica in sync", func() bool {
		out, _ := exec.Command("redis-cli", "-h", rhost, "-p", rport, "info", "replication").Output()
		return strings.Contains(string(out), "master_link_status:up")
	})
	bin, args := "redis-sentinel", []string{}
	if _, err := exec.LookPath(bin); err != nil {
		bin, args = "redis-server", []string{"--sentinel"} // the same program, in Sentinel mode
	}
	for range 3 {
		addr := freePort(t)
		host, port, _ := strings.Cut(addr, ":")
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("bind %s\nport %s\ndir %s\nsentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
			host, port, dir, sentinelMaster, mhost, mport, sentinelMaster, sentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		start(t, bin, nil, append([]string{conf}, args...)...)
		s.sentinels = append(s.sentinels, addr)
	}
	waitFor(t, 20*time.Second, "every Sentinel to know the replica and the others", func() bool {
		for _, a := range s.sentinels {
			host, port, _ := strings.Cut(a, ":")
			out, _ := exec.Command("redis-cli", "-h", host, "-p", port, "sentinel", "master", sentinelMaster).Output()
			f := strings.Fields(string(out))
			var replicas, others string
			for i := 0; i+1 < len(f); i++ {
				switch f[i] {
				case "num-slaves":
					replicas = f[i+1]
				case "num-other-sentinels":
					others = f[i+1]
				}
			}
			if replicas != "1" || others != "2" {
				return false
			}
		}
		return true
	})
	return s
}

func (s *sentinelSet) url() string {
	return "redis+sentinel://" + strings.Join(s.sentinels, ",") + "/" + sentinelMaster + "/0"
}

// masterAddr asks a Sentinel which server is the master now.
func (s *sentinelSet) masterAddr() string {
	host, port, _ := strings.Cut(s.sentinels[0], ":")
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "sentinel", "get-master-addr-by-name", sentinelMaster).Output()
	if err != nil {
		return ""
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return ""
	}
	return f[0] + ":" + f[1]
}

// Two replicas share a rate limit through Redis found by Sentinel. The
// master is SIGKILLed while events flow; Sentinel promotes the replica.
// Every event is delivered, the backend never sees more than the limit
// plus one extra burst in a second (limit state is replicated
// asynchronously, so one burst may be granted twice), and neither whguard
// exits.
func TestE2ERedisSentinelFailover(t *testing.T) {
	t.Parallel()
	rs := startSentinelSet(t)
	b := newProbeBackend(t, 5*time.Millisecond)
	s := newProtectedSet(t, 2, b, "WHGUARD_REDIS_URL="+rs.url(), "WHGUARD_BACKEND_RATE_LIMIT=20/s", "WHGUARD_BACKEND_RATE_BURST=5")
	const n = 240
	s.sendMany("sen", n) // acknowledged at once: the limit paces the deliveries
	waitFor(t, 30*time.Second, "the first events delivered", func() bool { got, _ := b.delivered(); return got >= 40 })
	old := rs.master.addr
	if err := rs.master.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 30*time.Second, "Sentinel to promote the replica", func() bool { return rs.masterAddr() == rs.replAddr })
	t.Logf("Sentinel promoted %s %s after the master %s was killed", rs.replAddr, time.Since(killed).Round(time.Millisecond), old)
	s.waitAllDelivered(n, 90*time.Second, 0)
	if got := b.mostInOneSecond(); got > 20+5+5+jitterAllowance {
		t.Errorf("%d requests started within one second; the limit is 20/s with a burst of 5, and one extra burst may pass a failover", got)
	}
	for i, r := range s.replicas {
		select {
		case err := <-r.p.done:
			r.p.done <- err
			t.Errorf("replica %d exited: %v", i, err)
		default:
		}
	}
	waitFor(t, 20*time.Second, "whguard_redis_up 1 on the new master", func() bool {
		return s.metric(0, "whguard_redis_up") == 1 && s.metric(1, "whguard_redis_up") == 1
	})
	t.Logf("%d events delivered, at most %d in one second", n, b.mostInOneSecond())
}
