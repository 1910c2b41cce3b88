package fleettest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The separate nats-server the tests run is built from the module this
// repository requires (the same version as the embedded server), once
// per version, under the system's temporary directory: no package to
// install, and never skipped for want of one.
const natsServerModule = "github.com/nats-io/nats-server/v2"

var natsBin Built

func NATSServerBinary(t *testing.T) string {
	t.Helper()
	return natsBin.Get(t, "nats-server", buildNATSServer)
}

// Built is a program the tests build once per run.
type Built struct {
	once sync.Once
	path string
	err  error
}

// Get builds it with build the first time, and fails the test when that failed.
func (b *Built) Get(t *testing.T, what string, build func() (string, error)) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = build() })
	if b.err != nil {
		t.Fatalf("building %s: %v", what, b.err)
	}
	return b.path
}

// GoBinary is the go command that builds what the tests run.
func GoBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

func buildNATSServer() (string, error) {
	goBin := GoBinary()
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		return "", fmt.Errorf("go list -m %s: %v", natsServerModule, err)
	}
	dir := filepath.Join(os.TempDir(), "apmwatch-test-nats-server")
	path := filepath.Join(dir, "nats-server-"+version)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := path + ".tmp." + strconv.Itoa(os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, natsServerModule)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v: %s", natsServerModule, err, out)
	}
	return path, os.Rename(tmp, path)
}

// natsNode is one nats-server process; kill and start keep its ports
// and its JetStream store.
type natsNode struct {
	Name, client, route, dir string
	cmd                      *exec.Cmd
}

// NATSCluster is n nats-server processes on loopback, routed to each
// other, JetStream on each.
type NATSCluster struct {
	t     *testing.T
	bin   string
	Nodes []*natsNode
}

func StartCluster(t *testing.T, n int) *NATSCluster {
	t.Helper()
	c := &NATSCluster{t: t, bin: NATSServerBinary(t)}
	base := t.TempDir()
	for i := range n {
		c.Nodes = append(c.Nodes, &natsNode{Name: "n" + strconv.Itoa(i), client: FreePort(t), route: FreePort(t),
			dir: filepath.Join(base, "n"+strconv.Itoa(i))})
	}
	for i := range c.Nodes {
		c.Start(i)
	}
	t.Cleanup(func() {
		for i := range c.Nodes {
			c.Kill(i)
		}
	})
	c.WaitJetStream()
	return c
}

// URL names every node, as a client of a cluster is given.
func (c *NATSCluster) URL() string {
	var us []string
	for _, n := range c.Nodes {
		us = append(us, "nats://"+n.client)
	}
	return strings.Join(us, ",")
}

func (c *NATSCluster) Start(i int) {
	c.t.Helper()
	n := c.Nodes[i]
	var routes []string
	for _, o := range c.Nodes {
		if o != n {
			routes = append(routes, "nats://"+o.route)
		}
	}
	host, port, _ := net.SplitHostPort(n.client)
	rhost, rport, _ := net.SplitHostPort(n.route)
	n.cmd = exec.Command(c.bin, "-n", n.Name, "-a", host, "-p", port, "-js", "-sd", n.dir,
		"--cluster_name", "apmwatch-test", "--cluster", "nats://"+rhost+":"+rport, "--routes", strings.Join(routes, ","))
	if err := n.cmd.Start(); err != nil {
		c.t.Fatalf("starting nats-server %s: %v", n.Name, err)
	}
}

// Kill ends node i at once (SIGKILL: no goodbye to its routes).
func (c *NATSCluster) Kill(i int) {
	n := c.Nodes[i]
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.cmd.Wait()
	n.cmd = nil
}

// WaitJetStream waits until the cluster has a JetStream meta leader (an
// account info answers).
func (c *NATSCluster) WaitJetStream() {
	c.t.Helper()
	WaitFor(c.t, 60*time.Second, "the cluster's JetStream", func() bool {
		nc, err := nats.Connect(c.URL())
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		_, err = js.AccountInfo(c.t.Context())
		return err == nil
	})
}

// WaitCurrent waits until every stream has a leader and all its replicas
// are current: a node that returned has caught up (killing another one
// before that leaves a stream without a quorum, as it would anywhere).
func (c *NATSCluster) WaitCurrent() {
	c.t.Helper()
	js := JetStream(c.t, c.URL())
	WaitFor(c.t, 120*time.Second, "every stream's replicas current", func() bool {
		l := js.ListStreams(c.t.Context())
		n := 0
		for info := range l.Info() {
			n++
			cl := info.Cluster
			if cl == nil || cl.Leader == "" || len(cl.Replicas) != info.Config.Replicas-1 {
				return false
			}
			for _, r := range cl.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
		}
		return l.Err() == nil && n > 0
	})
}

// Index returns the node named name.
func (c *NATSCluster) Index(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	c.t.Fatalf("no node %q", name)
	return -1
}
