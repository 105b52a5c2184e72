package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc CPU times.
const clockTicks = 100

// cpuSnapshot is the CPU time used so far, in clock ticks: machine-wide,
// by the server under test, by all PostgreSQL processes and by the bench
// process itself (load generator and fast backend).
type cpuSnapshot struct {
	at                       time.Time
	busy, total, steal       int64
	server, postgres, itself int64
}

// CPUUse is where the cores went during a run, in cores (1.0 = one core
// busy for the whole run).
type CPUUse struct {
	Server   float64 `json:"server"`
	Postgres float64 `json:"postgres"`
	Bench    float64 `json:"bench"`
	Other    float64 `json:"other"`
	Idle     float64 `json:"idle"`
	// Steal is CPU the hypervisor gave to other guests while this one
	// wanted it (/proc/stat "steal"): on a shared VM, a run with much of
	// it measured a slower machine.
	Steal float64 `json:"steal"`
}

// snapshotCPU reads the counters; serverPID 0 means no server process.
func snapshotCPU(serverPID int) cpuSnapshot {
	s := cpuSnapshot{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i := 1; i < len(f) && i <= 8; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			s.total += v
			switch i {
			case 4, 5: // idle, iowait
			case 8:
				s.steal += v
			default:
				s.busy += v
			}
		}
	}
	if serverPID > 0 {
		s.server, _, _ = cpuTicks(serverPID)
	}
	s.itself, _, _ = cpuTicks(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, comm, err := cpuTicks(pid); err == nil && comm == "postgres" {
			s.postgres += t
		}
	}
	return s
}

// use returns the CPU spent between s and later, in cores.
func (s cpuSnapshot) use(later cpuSnapshot) CPUUse {
	secs := later.at.Sub(s.at).Seconds()
	if secs <= 0 {
		return CPUUse{}
	}
	cores := func(ticks int64) float64 { return float64(ticks) / clockTicks / secs }
	u := CPUUse{
		Server:   cores(later.server - s.server),
		Postgres: cores(later.postgres - s.postgres),
		Bench:    cores(later.itself - s.itself),
	}
	busy := cores(later.busy - s.busy)
	total := cores(later.total - s.total)
	u.Steal = cores(later.steal - s.steal)
	u.Other = max(0, busy-u.Server-u.Postgres-u.Bench)
	u.Idle = max(0, total-busy-u.Steal)
	return u
}
