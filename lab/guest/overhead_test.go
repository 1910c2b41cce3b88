//go:build labguest

package guest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// bpftraceDir is where make lab-bench puts Debian's bpftrace and its
// libraries (LAB_EXTRA, built by lab/bpftrace-tree.sh).
const bpftraceDir = "/extra"

// bpftraceModify is the script an engineer would write to watch the same
// modifies: QPN, attribute mask, migration state, alternate port and DLID,
// return code, and who made the call.
const bpftraceModify = `BEGIN { printf("ready\n"); }
kretfunc:ib_core:ib_modify_qp_with_udata {
	printf("%s %d qpn %u mask 0x%x mig %u alt port %u dlid %u ret %d\n", comm, pid,
		args->ib_qp->qp_num, args->attr_mask, args->attr->path_mig_state,
		args->attr->alt_port_num, args->attr->alt_ah_attr.ib.dlid, retval);
}`

// BenchmarkTraceOverhead measures probes on the control path: the rate of
// RTS->RTS modifies in lab-pair's tight loop (ib_modify_qp_with_udata)
// with nothing attached, with an empty fexit program on the same function
// (the floor any probe pays), with `apmwatch trace` and with bpftrace,
// each reading and stopped (SIGSTOP: the in-kernel cost alone; the
// buffers hold every record of the loop, so every call pays the full
// cost). All in one run, interleaved. The in-kernel cost per call is the
// time per call minus the time without a probe in the same run, both from
// the fastest chunk of calls, the median over runs (reportOverhead); it is
// reported as a ratio to the floor's.
// Figures for docs/performance.md: `make lab-bench` runs it on both
// kernels, with bpftrace in the guest.
func BenchmarkTraceOverhead(b *testing.B) {
	const n = "100000"
	runs := envCount(b, "APMWATCH_BENCH_RUNS", 9)
	rates, best := map[string][]float64{}, map[string][]float64{}
	ob := overheadBench{
		loop:     func(col string) { loopModify(b, n, col, rates, best) },
		floor:    []floorHook{fexitAt("ib_modify_qp_with_udata")},
		bpftrace: bpftraceModify,
	}
	attaches := ob.run(b, runs)
	reportOverhead(b, rates, best, "none", "floor")
	slices.Sort(attaches)
	b.Logf("apmwatch trace attach (exec to ready file): median %v, runs %v", attaches[len(attaches)/2], attaches)
	b.ReportMetric(float64(attaches[len(attaches)/2].Milliseconds()), "attach-ms")
}

// overheadBench is one probe-cost benchmark: a loop over one path, the
// floor (an empty program on each hook apmwatch uses on that path) and the
// bpftrace script an engineer would write to see the same fields.
type overheadBench struct {
	loop     func(col string) // runs the loop once, filing its figures under col
	floor    []floorHook
	bpftrace string // "" when there is no bpftrace column
	first    int    // the number the log gives the first run
}

// run measures, runs times and interleaved: no probe, the floor, apmwatch
// trace reading and stopped (and a baseline build's, apmwatchColumns),
// bpftrace reading and stopped (when Debian's bpftrace is in the guest).
// It returns apmwatch trace's attach times.
func (o overheadBench) run(b *testing.B, runs int) []time.Duration {
	bt := filepath.Join(bpftraceDir, "bin", "bpftrace")
	if _, err := os.Stat(bt); err != nil || o.bpftrace == "" {
		b.Logf("no bpftrace at %s (make lab-bench puts it there): its columns are not measured", bt)
		bt = ""
	}
	var attaches []time.Duration // apmwatch trace: exec to ready file
	for i := 0; i < runs; i++ {
		o.loop("none")
		detach := attachFloor(b, o.floor...)
		o.loop("floor")
		detach()

		for _, c := range apmwatchColumns() {
			tr := startTracer(b, c.bin, nil, []string{"trace", "--output", "json", "--ring-buffer-mib", "64",
				"--ready-file"}, "")
			if c.col == "apmwatch" {
				attaches = append(attaches, tr.attach)
			}
			o.loop(c.col)
			tr.pause(b)
			o.loop(c.col + "-stopped")
			b.Logf("run %d: %s trace: %s", o.first+i, c.col, tr.end(b, "lost:"))
		}

		if bt != "" {
			tr := startTracer(b, bt, []string{"LD_LIBRARY_PATH=" + filepath.Join(bpftraceDir, "lib"),
				"BPFTRACE_PERF_RB_PAGES=8192"}, []string{"-B", "line", "-e", o.bpftrace}, "ready")
			o.loop("bpftrace")
			tr.pause(b)
			o.loop("bpftrace-stopped")
			b.Logf("run %d: bpftrace: %s", o.first+i, tr.end(b, "Lost"))
		}
	}
	return attaches
}

// apmwatchColumns are the apmwatch builds a benchmark measures: the one
// under test and, when APMWATCH_BENCH_BASELINE names another build's
// binary (make lab-bench BASELINE=rev), that one as "baseline".
func apmwatchColumns() []struct{ col, bin string } {
	cols := []struct{ col, bin string }{{"apmwatch", "apmwatch"}}
	if bl := os.Getenv("APMWATCH_BENCH_BASELINE"); bl != "" {
		cols = append(cols, struct{ col, bin string }{"baseline", bl})
	}
	return cols
}

// loopModify runs lab-pair's modify loop and files its whole-loop rate and
// its fastest chunk under col.
func loopModify(b *testing.B, n, col string, rates, best map[string][]float64) {
	ls := MustRun(b, "lab-pair", "--loop-modify", n, "--duration", "2m")
	r := Filter(ls, Match("bench", "loop_modify"))
	if len(r) != 1 || r[0].Int("failed") != 0 {
		b.Fatalf("lab-pair --loop-modify: %v", ls)
	}
	rate, _ := strconv.ParseFloat(r[0].Str("per_second"), 64)
	chunk, _ := strconv.ParseFloat(r[0].Str("best_chunk_ns_per_modify"), 64)
	rates[col] = append(rates[col], rate)
	best[col] = append(best[col], chunk)
}

// BenchmarkProbeParts measures what each step of a probe costs: the floor
// (an empty fexit program on ib_modify_qp_with_udata) plus one step
// (probeParts), in the modify loop, against the floor alone.
func BenchmarkProbeParts(b *testing.B) {
	const n = "100000"
	runs := envCount(b, "APMWATCH_BENCH_RUNS", 5)
	rates, best := map[string][]float64{}, map[string][]float64{}
	for i := 0; i < runs; i++ {
		loopModify(b, n, "none", rates, best)
		detach := attachFloor(b, fexitAt("ib_modify_qp_with_udata"))
		loopModify(b, n, "floor", rates, best)
		detach()
		for _, p := range probeParts {
			detach := attachProg(b, "ib_modify_qp_with_udata", ebpf.AttachTraceFExit, p)
			loopModify(b, n, "floor+"+p.name, rates, best)
			detach()
		}
	}
	reportOverhead(b, rates, best, "none", "floor")
}

// reportOverhead logs each column's in-kernel cost per call against the
// floor's, and reports the ratios as metrics. A run's time per call is its
// fastest chunk of calls (best), which the host's preemptions of the
// guest's vCPUs rarely reach; a column's cost is the median over runs of
// its time minus the time without a probe in the same run. The median
// rates over whole loops (rates) are logged beside it.
func reportOverhead(b *testing.B, rates, best map[string][]float64, none, floor string) {
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	cost := func(col string) float64 {
		d := make([]float64, len(best[col]))
		for i, v := range best[col] {
			d[i] = v - best[none][i]
		}
		return med(d)
	}
	cols := make([]string, 0, len(best))
	for c := range best {
		cols = append(cols, c)
	}
	slices.SortFunc(cols, func(x, y string) int { return int(100 * (cost(x) - cost(y))) })
	for _, c := range cols {
		line := fmt.Sprintf("%-17s %7.0f ns a call, +%5.0f ns", c, med(best[c]), cost(c))
		if c != none && c != floor {
			line += fmt.Sprintf(", %5.2f x the floor", cost(c)/cost(floor))
			b.ReportMetric(cost(c)/cost(floor), c+"/floor")
		}
		b.Logf("%s; whole loops: median %.0f calls/s (%.2f of %s); best chunks %.0f, rates %.0f", line, med(rates[c]),
			med(rates[c])/med(rates[none]), none, best[c], rates[c])
	}
	b.ReportMetric(cost(floor), "floor-ns")
}

// tracer is a tracing program running beside the loop: apmwatch trace or
// bpftrace, its output in a file of its own.
type tracer struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	attach time.Duration // start to ready
}

// startTracer runs name with args and waits until it is ready: with ready
// "", until the file named by a last argument added here exists (apmwatch's
// ready file); else until its standard output, a file, holds ready.
func startTracer(b *testing.B, name string, env, args []string, ready string) *tracer {
	b.Helper()
	out := filepath.Join(b.TempDir(), "out")
	tr := &tracer{cmd: exec.Command(name, args...)}
	if ready == "" {
		tr.cmd.Args = append(tr.cmd.Args, out)
	} else {
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		tr.cmd.Stdout = f
	}
	tr.cmd.Env = append(os.Environ(), env...)
	tr.cmd.Stderr = &tr.stderr
	start := time.Now()
	if err := tr.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if got, err := os.ReadFile(out); err == nil && bytes.Contains(got, []byte(ready)) {
			tr.attach = time.Since(start)
			return tr
		}
		if time.Now().After(deadline) {
			_ = tr.cmd.Process.Kill()
			_ = tr.cmd.Wait()
			b.Fatalf("%s not ready: %s", name, tr.stderr.String())
		}
	}
}

func (tr *tracer) pause(b *testing.B) {
	if err := tr.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		b.Fatal(err)
	}
}

// end resumes and stops the tracer, and returns its stderr line that
// contains key (its count of lost records).
func (tr *tracer) end(b *testing.B, key string) string {
	_ = tr.cmd.Process.Signal(syscall.SIGCONT)
	_ = tr.cmd.Process.Signal(syscall.SIGTERM)
	t := time.AfterFunc(time.Minute, func() { _ = tr.cmd.Process.Kill() })
	_ = tr.cmd.Wait()
	t.Stop()
	for _, l := range strings.Split(tr.stderr.String(), "\n") {
		if strings.Contains(l, key) {
			return strings.TrimSpace(l)
		}
	}
	return "(no " + key + " line)"
}
