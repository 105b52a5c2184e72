package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/whguard/whguard/internal/testport"
)

// proc is a server under test running as a child process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// startProc starts argv with env, its output going to logPath. The child is
// killed if the bench dies.
func startProc(name string, argv, env []string, logPath string) (*proc, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls url until it answers 200, the process exits or timeout
// passes.
func (p *proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v); log:\n%s", p.name, p.waitErr, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; log:\n%s", p.name, timeout, p.logTail())
		}
	}
}

// logTail returns the last lines of the process's output.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// memory returns the process's peak (VmHWM) and current (VmRSS) resident
// set size in bytes.
func (p *proc) memory() (peak, current int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "VmHWM" && name != "VmRSS") {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if name == "VmHWM" {
			peak = kb * 1024
		} else {
			current = kb * 1024
		}
	}
	return peak, current, nil
}

// stop sends SIGTERM and waits; after timeout it kills the process.
func (p *proc) stop(timeout time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		fmt.Fprintf(os.Stderr, "whguard-bench: %s did not stop within %s; killing it\n", p.name, timeout)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freeAddr returns a loopback address with a port free at the time of the
// call, below the kernel's ephemeral range, so that none of the load's
// outgoing connections takes it before the server binds it.
func freeAddr() (string, error) {
	p, err := testport.Pick()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// cpuTicks returns the user+system CPU time of a process in clock ticks
// (fields 14 and 15 of /proc/PID/stat) and its command name.
func cpuTicks(pid int) (ticks int64, comm string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	open, closeIdx := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closeIdx < open {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	comm = string(b[open+1 : closeIdx])
	f := strings.Fields(string(b[closeIdx+1:]))
	if len(f) < 13 {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s, comm, nil
}
