//go:build labguest

// Probe cost on the two other hot paths, measured as the control path's
// (overheadBench): the QP event hook, driven by the simulated HCA's event
// loop, and the CM's LAP path (umad write, MAD send and receive
// tracepoints, cm_lap_handler), driven by duplicate LAPs.
package guest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// bpftraceQPEvent is the script an engineer would write to watch QP async
// events on the hook apmwatch uses (FUNC): who, QPN, event type.
const bpftraceQPEvent = `BEGIN { printf("ready\n"); }
kfunc:%s:%s {
	printf("%%s %%d qpn %%u event %%d\n", comm, pid, args->event->element.qp->qp_num, args->event->event);
}`

// bpftraceLAP is the script an engineer would write to watch a LAP's way
// through the stack: the umad write, the MAD sent and received (class,
// attribute, TID, LIDs), and the CM handler's result.
const bpftraceLAP = `BEGIN { printf("ready\n"); }
tracepoint:ib_umad:ib_umad_write {
	printf("%s %d umad write dev %u port %u class 0x%x attr 0x%x tid 0x%llx\n", comm, pid,
		args->dev_index, args->port_num, args->mgmt_class, args->attr_id, args->tid);
}
tracepoint:ib_mad:ib_mad_ib_send_mad {
	printf("send dev %u port %u qp %u class 0x%x attr 0x%x tid 0x%llx dlid %u\n",
		args->dev_index, args->port_num, args->qp_num, args->mgmt_class, args->attr_id, args->tid, args->dlid);
}
tracepoint:ib_mad:ib_mad_recv_done_handler {
	printf("recv dev %u port %u qp %u class 0x%x attr 0x%x tid 0x%llx slid %u\n",
		args->dev_index, args->port_num, args->qp_num, args->mgmt_class, args->attr_id, args->tid, args->slid);
}
kretfunc:ib_cm:cm_lap_handler { printf("%s cm_lap_handler ret %d\n", comm, retval); }`

// qpEventHook is the QP event hook apmwatch attaches on this kernel:
// __ib_qp_event_handler where ib_core has it (every QP), else ib_uverbs'
// handler (user QPs).
func qpEventHook(b *testing.B) (module, fn string) {
	ks, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		b.Fatal(err)
	}
	if bytes.Contains(ks, []byte(" __ib_qp_event_handler\t")) {
		return "ib_core", "__ib_qp_event_handler"
	}
	return "ib_uverbs", "ib_uverbs_qp_event_handler"
}

// BenchmarkQPEventOverhead: COMM_EST raised on one user QP through its
// event handler by the simulated HCA, 50,000 times a loop (lab-ib bench:
// the driver times chunks of 64 calls); the floor is an empty fentry
// program on the QP event hook. The QP's owner never reads its async
// events (lab-ibpair --no-events), so every column pays the same handler.
func BenchmarkQPEventOverhead(b *testing.B) {
	const n = "50000"
	runs := envCount(b, "APMWATCH_BENCH_RUNS", 9)
	module, fn := qpEventHook(b)
	b.Logf("QP event hook: %s:%s", module, fn)
	b.Cleanup(func() { resetFabric(b) })
	rates, best := map[string][]float64{}, map[string][]float64{}
	var qpn int64
	ob := overheadBench{
		loop:     func(col string) { loopQPEvents(b, qpn, n, col, rates, best) },
		floor:    []floorHook{fentryAt(fn)},
		bpftrace: fmt.Sprintf(bpftraceQPEvent, module, fn),
	}
	for i := 0; i < runs; i++ {
		// A fresh pair each run: the unread events are freed with its QPs.
		// Simulated traffic arms the pair, then stops for the loop.
		MustRun(b, "lab-ib", "traffic", "on")
		p := Start(b, "lab-ibpair", "--behavior", "never-rearm", "--no-events")
		qpn = QPN(b, p.Ready(b, 2), "ibsim0")
		MustRun(b, "lab-ib", "traffic", "off")
		ob.first = i
		ob.run(b, 1)
		if err := p.Stop(b); err != nil {
			b.Fatalf("lab-ibpair: %v", err)
		}
	}
	reportOverhead(b, rates, best, "none", "floor")
}

// loopQPEvents runs the driver's event loop once on ibsim0's QP qpn and
// files its whole-loop rate and its fastest chunk under col.
func loopQPEvents(b *testing.B, qpn int64, n, col string, rates, best map[string][]float64) {
	ls := MustRun(b, "lab-ib", "bench", "--dev", "ibsim0", "--qpn", fmt.Sprint(qpn), n)
	if len(ls) != 1 || strconv.FormatInt(ls[0].Int("events"), 10) != n {
		b.Fatalf("lab-ib bench: %v", ls)
	}
	chunk, err := strconv.ParseFloat(ls[0].Str("best_chunk_ns_per_event"), 64)
	if err != nil || chunk <= 0 {
		b.Fatalf("lab-ib bench: no chunk time: %v", ls)
	}
	rates[col] = append(rates[col], float64(ls[0].Int("events"))*1e9/float64(ls[0].Int("ns")))
	best[col] = append(best[col], chunk)
}

// BenchmarkCMOverhead: 4,096 duplicate LAPs a loop from ibsim0 to the
// kernel ULP's cm_id on ibsim1, which holds an unanswered LAP, in bursts
// of 256, each until cm_lap_handler counted all of it (lab-lap --bench).
// Every LAP passes the umad write, MAD send and MAD receive tracepoints
// and cm_lap_handler (entry and exit): the floor is an empty program on
// each. The loop runs with the second CPU offline, so that the whole path
// (sender, ibsim's delivery, ib_mad's and ib_cm's work items) runs on one
// CPU and its time is the sum of their costs; apmwatch's and bpftrace's
// readers share that CPU in the reading columns.
func BenchmarkCMOverhead(b *testing.B) {
	const n = "4096"
	runs := envCount(b, "APMWATCH_BENCH_RUNS", 9)
	_, q1, id0, id1 := startIBULPCM(b, "correct")
	MustRun(b, "lab-ib", "traffic", "off")
	lapArgs := []string{"--dev", "ibsim0", "--to", "ibsim1", "--local-comm-id", fmt.Sprint(id0),
		"--remote-comm-id", fmt.Sprint(id1), "--remote-qpn", fmt.Sprint(q1)}
	from := nextSeq(b)
	MustRun(b, "lab-lap", lapArgs...)
	waitLog(b, from, "IB_CM_LAP_RECEIVED", Match("kind", "note", "what", "cm_lap_received", "qpn", q1))
	rates, best := map[string][]float64{}, map[string][]float64{}
	ob := overheadBench{
		loop: func(col string) { loopLAPs(b, lapArgs, n, col, rates, best) },
		floor: []floorHook{tpBTFAt("ib_umad_write"), tpBTFAt("ib_mad_ib_send_mad"),
			tpBTFAt("ib_mad_recv_done_handler"), fentryAt("cm_lap_handler"), fexitAt("cm_lap_handler")},
		bpftrace: bpftraceLAP,
	}
	ob.run(b, runs)
	reportOverhead(b, rates, best, "none", "floor")
}

// loopLAPs sends the duplicate LAPs once, on one CPU, and files the whole
// loop's rate and the fastest burst's time per LAP under col.
func loopLAPs(b *testing.B, lapArgs []string, n, col string, rates, best map[string][]float64) {
	cpu1 := "/sys/devices/system/cpu/cpu1/online"
	if err := os.WriteFile(cpu1, []byte("0"), 0); err != nil {
		b.Fatalf("taking CPU 1 offline: %v", err)
	}
	online := func() {
		if err := os.WriteFile(cpu1, []byte("1"), 0); err != nil {
			b.Fatalf("bringing CPU 1 back: %v", err)
		}
	}
	defer online() // also when Run fails the benchmark
	r := Run(b, "lab-lap", append(lapArgs, "--count", n, "--bench", "256")...)
	ls := Filter(r.Lines, Match("bench", "lap"))
	if r.Code != 0 || len(ls) != 1 || ls[0].Int("lost") != 0 {
		b.Fatalf("lab-lap --bench: exit %d, %v %s", r.Code, r.Lines, r.Stderr)
	}
	rate, _ := strconv.ParseFloat(ls[0].Str("per_second"), 64)
	burst, err := strconv.ParseFloat(ls[0].Str("best_burst_ns_per_mad"), 64)
	if err != nil || burst <= 0 {
		b.Fatalf("lab-lap --bench: no burst time: %v", ls)
	}
	rates[col] = append(rates[col], rate)
	best[col] = append(best[col], burst)
}

// bpftraceNotify is the script an engineer would write to watch
// ib_cm_notify: who, the connection's comm ID, CM and LAP state, the event
// and the result.
const bpftraceNotify = `BEGIN { printf("ready\n"); }
kretfunc:ib_cm:ib_cm_notify {
	printf("%s %d local_id 0x%x state %d lap %d event %d ret %d\n", comm, pid,
		args->cm_id->local_id, args->cm_id->state, args->cm_id->lap_state, args->event, retval);
}`

// BenchmarkCMNotifyOverhead: ib_cm_notify(COMM_EST) 50,000 times a loop on
// the kernel ULP's established cm_id (the CM answers -EISCONN and changes
// nothing), timed in chunks of 64 in the lab module (lab-ulp
// bench-notify); the floor is an empty fentry and fexit program on
// ib_cm_notify, as apmwatch attaches there (entry and exit joined).
func BenchmarkCMNotifyOverhead(b *testing.B) {
	const n = "50000"
	runs := envCount(b, "APMWATCH_BENCH_RUNS", 9)
	startIBULPCM(b, "correct")
	MustRun(b, "lab-ib", "traffic", "off")
	rates, best := map[string][]float64{}, map[string][]float64{}
	ob := overheadBench{
		loop:     func(col string) { loopNotify(b, n, col, rates, best) },
		floor:    []floorHook{fentryAt("ib_cm_notify"), fexitAt("ib_cm_notify")},
		bpftrace: bpftraceNotify,
	}
	ob.run(b, runs)
	reportOverhead(b, rates, best, "none", "floor")
}

// loopNotify runs the module's notify loop once and files its whole-loop
// rate and its fastest chunk under col.
func loopNotify(b *testing.B, n, col string, rates, best map[string][]float64) {
	ls := MustRun(b, "lab-ulp", "bench-notify", n)
	if len(ls) != 1 || strconv.FormatInt(ls[0].Int("calls"), 10) != n || ls[0].Int("ret") != -106 {
		b.Fatalf("lab-ulp bench-notify: %v, want %s calls answered -EISCONN (-106)", ls, n)
	}
	chunk, err := strconv.ParseFloat(ls[0].Str("best_chunk_ns_per_call"), 64)
	if err != nil || chunk <= 0 {
		b.Fatalf("lab-ulp bench-notify: no chunk time: %v", ls)
	}
	rates[col] = append(rates[col], float64(ls[0].Int("calls"))*1e9/float64(ls[0].Int("ns")))
	best[col] = append(best[col], chunk)
}
