package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The raft-port attacker of TestIntegrationRaftFloodKeepsCommitLatency runs
// in a process of its own, in a session of its own, at low CPU priority: in
// the test's process its client-side TLS work would be taken out of the
// nodes' CPU share (and their Go scheduler's two Ps), and on a saturated
// machine the test would judge the machine, not the stream layer. The
// nodes' cost of refusing the flood stays in the measured process.

// raftFloodEnv carries the attacker's raftFloodSpec (JSON) to the child.
const raftFloodEnv = "HOTSPLIT_TEST_RAFT_FLOOD_SPEC"

// raftFloodSpec is what the attacker process floods and with what.
type raftFloodSpec struct {
	Addrs []string // raft ports
	// HalfOpen is the number of idle connections kept open per node.
	HalfOpen int
	// A node certificate of a CA the cluster does not trust.
	CertPEM, KeyPEM []byte
}

// raftFloodLine prefixes the attacker's answers on its stdout, which it
// shares with the test framework's own output.
const raftFloodLine = "raftflood: "

// TestHelperRaftFlood is the attacker process, not a test: it skips unless
// started by startRaftFlood. It reads "on" and "off" from stdin, answers
// each on stdout, and exits when stdin closes (its parent ended) or at its
// -test.timeout.
func TestHelperRaftFlood(t *testing.T) {
	raw := os.Getenv(raftFloodEnv)
	if raw == "" {
		t.Skip("the attacker process of TestIntegrationRaftFloodKeepsCommitLatency")
	}
	// The parent lowered its priority right after start; again here, for
	// any thread started in between (threads inherit it).
	if err := lowerPriority(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	var spec raftFloodSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatalf("%s: %v", raftFloodEnv, err)
	}
	cert, err := tls.X509KeyPair(spec.CertPEM, spec.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker does not verify the nodes: that would only spend its
	// CPU, and the nodes' work is the same. It presents its certificate
	// whatever the node asks for: from Certificates, crypto/tls sends only
	// a certificate of a CA the server names, so a node would see no
	// certificate at all and never verify the bad one.
	bad := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}

	var stop func() (halfOpen, badHandshakes int64)
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	fmt.Println(raftFloodLine + "ready")
	sc := bufio.NewScanner(os.Stdin)
	for n := 0; n < 1000 && sc.Scan(); n++ {
		switch cmd := sc.Text(); {
		case cmd == "on" && stop == nil:
			stop = floodRaftPorts(spec, bad)
			fmt.Println(raftFloodLine + "on")
		case cmd == "off" && stop != nil:
			h, b := stop()
			stop = nil
			fmt.Printf("%soff %d %d\n", raftFloodLine, h, b)
		default:
			t.Fatalf("unexpected command %q", cmd)
		}
	}
}

// floodRaftPorts starts, against every address, spec.HalfOpen idle
// connections (each reopened 1 s after the node closes it) and a
// bad-certificate handshake every 20 ms (at most badInFlight at once).
// stop ends the flood, closes its connections, and returns how many of
// each reached the node (were connected): each is refused by the node
// exactly once.
func floodRaftPorts(spec raftFloodSpec, bad *tls.Config) (stop func() (halfOpen, badHandshakes int64)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var halfOpen, badHandshakes atomic.Int64
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for _, addr := range spec.Addrs {
		for range spec.HalfOpen {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mu sync.Mutex // guards cur
				var cur net.Conn
				go func() { // one closer per worker, not per connection
					<-ctx.Done()
					mu.Lock()
					if cur != nil {
						cur.Close()
					}
					mu.Unlock()
				}()
				for k := 0; k < 100 && ctx.Err() == nil; k++ {
					if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
						halfOpen.Add(1)
						mu.Lock()
						cur = conn
						mu.Unlock()
						if ctx.Err() == nil {
							io.Copy(io.Discard, conn) // until the node closes it
						}
						conn.Close()
					}
					pause(time.Second)
				}
			}()
		}
		// Bad certificates: a handshake every 20 ms, a few at once, so
		// that the rate does not fall with the time a loaded node takes to
		// answer; a tick with every slot busy is skipped.
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			slots := make(chan struct{}, badInFlight)
			for k := 0; k < 10000; k++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				select {
				case slots <- struct{}{}:
				default:
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { <-slots }()
					// Not cancelled by stop: a connection the kernel
					// completed is counted, so the count matches the
					// node's refusals.
					if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
						badHandshakes.Add(1)
						tc := tls.Client(conn, bad)
						tc.SetDeadline(time.Now().Add(time.Second))
						if tc.HandshakeContext(ctx) == nil {
							tc.Read(make([]byte, 1)) // the node's alert
						}
						tc.Close()
					}
				}()
			}
		}()
	}
	return func() (int64, int64) {
		cancel()
		wg.Wait()
		return halfOpen.Load(), badHandshakes.Load()
	}
}

// badInFlight bounds the attacker's bad-certificate handshakes in flight
// per node: enough to keep 50 a second while a loaded node takes tens of
// milliseconds to answer each.
const badInFlight = 4

// raftFloodProcess drives an attacker process.
//
// Concurrency: for the test goroutine only.
type raftFloodProcess struct {
	t       *testing.T
	in      io.WriteCloser
	answers chan string // the attacker's answers, prefix removed

	mu     sync.Mutex // guards output
	output []string   // its other output (test framework), for failures
}

// startRaftFlood starts the attacker process for spec, at low CPU priority
// (lowerPriority). It is stopped at the end of the test, and in any case
// exits within two minutes (longer than the test runs, even when leader
// changes make it measure longer).
func startRaftFlood(t *testing.T, spec raftFloodSpec) *raftFloodProcess {
	t.Helper()
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperRaftFlood$", "-test.count=1", "-test.timeout=2m")
	// One P: the attacker never runs on both cores at once.
	cmd.Env = append(os.Environ(), raftFloodEnv+"="+string(js), "GOMAXPROCS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // see lowerPriority
	cmd.WaitDelay = 5 * time.Second
	out, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	in, err := cmd.StdinPipe()
	if err != nil {
		kill()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		kill()
		t.Fatalf("attacker process: %v", err)
	}
	p := &raftFloodProcess{t: t, in: in, answers: make(chan string, 8)}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		w.Close() // the reader below ends, and so does any wait for an answer
		close(exited)
	}()
	go func() {
		defer close(p.answers)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), raftFloodLine); ok {
				select {
				case p.answers <- a:
				default: // more answers than commands: the wait for one fails
				}
				continue
			}
			p.mu.Lock()
			if len(p.output) < 100 {
				p.output = append(p.output, sc.Text())
			}
			p.mu.Unlock()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		in.Close() // the attacker stops its flood and exits at end of input
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		kill()
		<-exited
	})
	if err := lowerPriority(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.await("ready")
	group, _ := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", cmd.Process.Pid))
	t.Logf("attacker process %d at nice %d; autogroup: %s", cmd.Process.Pid, attackerNice, bytes.TrimSpace(group))
	return p
}

// attackerNice is the attacker's CPU priority: low, not the lowest. On
// this 2-core machine at load 20-25, an attacker at nice 19 could not open
// its 384 connections within 10 s, so no flood could be proven; at nice 0
// (before it ran on one P and stopped verifying the nodes) its wakeups
// delayed the nodes enough to fail 5 runs in 10. At nice 5 it gets enough
// CPU and yields to the machine's other work.
const attackerNice = 5

// lowerPriority gives process pid, which leads a session of its own, the
// priority attackerNice: for every thread (setpriority on a process group
// reaches every thread of it; threads started later inherit it), and for
// its autogroup, where the kernel schedules sessions as groups (there a
// thread's nice weighs only within its session, and the session's own
// weight is what the machine's other work sees).
func lowerPriority(pid int) error {
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		return fmt.Errorf("attacker process %d must lead its own process group (it is in %d: %v)", pid, pgid, err)
	}
	if err := syscall.Setpriority(syscall.PRIO_PGRP, pid, attackerNice); err != nil {
		return fmt.Errorf("attacker process at nice %d: %w", attackerNice, err)
	}
	// Best effort: a kernel without autogroup has no such file, and a
	// locked-down /proc may refuse it; startRaftFlood logs what it got.
	os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(strconv.Itoa(attackerNice)), 0)
	return nil
}

// on starts the flood; off stops it and returns how many half-open
// connections and bad-certificate handshakes it made.
func (p *raftFloodProcess) on() { p.send("on"); p.await("on") }

func (p *raftFloodProcess) off() (halfOpen, badHandshakes int64) {
	p.send("off")
	a := p.await("off")
	if _, err := fmt.Sscanf(a, "off %d %d", &halfOpen, &badHandshakes); err != nil {
		p.t.Fatalf("attacker answered %q: %v", a, err)
	}
	return halfOpen, badHandshakes
}

func (p *raftFloodProcess) send(cmd string) {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		p.t.Fatalf("attacker process: %s: %v (its output: %s)", cmd, err, p.outputText())
	}
}

// await returns the attacker's next answer, which must start with want.
// The bound is generous: at low priority on a saturated machine the
// attacker may wait long for a CPU.
func (p *raftFloodProcess) await(want string) string {
	p.t.Helper()
	select {
	case a, ok := <-p.answers:
		if !ok {
			p.t.Fatalf("attacker process exited before answering %q (its output: %s)", want, p.outputText())
		}
		if !strings.HasPrefix(a, want) {
			p.t.Fatalf("attacker answered %q, want %q", a, want)
		}
		return a
	case <-time.After(20 * time.Second):
		p.t.Fatalf("attacker process: no %q within 20 s (its output: %s)", want, p.outputText())
		return ""
	}
}

func (p *raftFloodProcess) outputText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.output, "\n")
}
