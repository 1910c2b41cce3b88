//go:build labguest

package guest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// BenchmarkProbeRunTime says where the probes' cost on the control path
// goes, program by program: with kernel.bpf_stats_enabled the kernel
// counts each program's runs and the time spent in it (bpf_prog_info's
// run_cnt and run_time_ns; the trampoline's own cost is not in it). It
// runs `apmwatch trace -o json` beside lab-pair's modify loop (RTS->RTS
// rearms through libibverbs) and logs, for every program that ran, its
// runs per modify, its time per run and per modify. Figures for
// docs/performance.md ("Where the time goes"); with a baseline build
// (make lab-bench BASELINE=rev), that build's programs too, side by side.
func BenchmarkProbeRunTime(b *testing.B) {
	restore := bpfStats(b)
	defer restore()
	for _, c := range apmwatchColumns() {
		progRunTime(b, c.col, c.bin)
	}
}

// progRunTime runs one apmwatch build's trace beside the modify loop and
// logs its programs' cost.
func progRunTime(b *testing.B, col, bin string) {
	const n = 100000
	rates, best := map[string][]float64{}, map[string][]float64{}
	tr := startTracer(b, bin, nil, []string{"trace", "--output", "json", "--ring-buffer-mib", "64", "--ready-file"}, "")
	before := progStats(b)
	loopModify(b, strconv.Itoa(n), col, rates, best)
	after := progStats(b)
	b.Logf("%s trace: %s", col, tr.end(b, "lost:"))
	var rows []progRow
	total := 0.0
	for id, a := range after {
		s := before[id]
		runs, ns := a.runs-s.runs, a.ns-s.ns
		if runs == 0 {
			continue
		}
		r := progRow{name: a.name, perModify: float64(runs) / n, nsRun: float64(ns) / float64(runs), nsModify: float64(ns) / n, misses: a.misses - s.misses}
		rows = append(rows, r)
		total += r.nsModify
	}
	slices.SortFunc(rows, func(x, y progRow) int { return int(y.nsModify*100 - x.nsModify*100) })
	b.Logf("%s: %-16s %9s %9s %11s %7s", col, "program", "runs/mod", "ns/run", "ns/modify", "missed")
	for _, r := range rows {
		b.Logf("%s: %-16s %9.2f %9.0f %11.0f %7d", col, r.name, r.perModify, r.nsRun, r.nsModify, r.misses)
	}
	b.Logf("%s: %-16s %9s %9s %11.0f", col, "all programs", "", "", total)
	b.Logf("%s: loop %.0f modifies/s, best chunk %.0f ns a modify", col, rates[col][0], best[col][0])
	b.ReportMetric(total, col+"-prog-ns/modify")
}

type progRow struct {
	name                       string
	perModify, nsRun, nsModify float64
	misses                     uint64
}

type progStat struct {
	name             string
	runs, ns, misses uint64
}

// bpfStats turns kernel.bpf_stats_enabled on and returns what puts it back.
func bpfStats(b *testing.B) func() {
	const p = "/proc/sys/kernel/bpf_stats_enabled"
	old, err := os.ReadFile(p)
	if err != nil {
		b.Fatalf("bpf stats: %v", err)
	}
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		b.Fatalf("bpf stats: %v", err)
	}
	return func() { _ = os.WriteFile(p, old, 0o644) }
}

// progStats reads every loaded program's run count, run time and skipped
// runs, by program ID.
func progStats(b *testing.B) map[ebpf.ProgramID]progStat {
	out := map[ebpf.ProgramID]progStat{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return out
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded meanwhile
		}
		info, err := p.Info()
		if err != nil {
			p.Close()
			b.Fatalf("program %d: %v", id, err)
		}
		st, err := p.Stats()
		p.Close()
		if err != nil {
			b.Fatalf("program %d: %v", id, err)
		}
		s := progStat{name: info.Name, runs: st.RunCount, ns: uint64(st.Runtime / time.Nanosecond), misses: st.RecursionMisses}
		if s.name == "" {
			s.name = fmt.Sprint("prog-", id)
		}
		out[id] = s
	}
}
