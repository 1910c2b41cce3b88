package output

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"

	"github.com/apmwatch/apmwatch/event"
	"golang.org/x/sys/unix"
)

var attrNames = []struct {
	bit  uint32
	name string
}{
	{event.AttrState, "STATE"}, {event.AttrCurState, "CUR_STATE"}, {1 << 2, "EN_SQD_ASYNC_NOTIFY"},
	{event.AttrAccessFlags, "ACCESS_FLAGS"}, {event.AttrPKeyIndex, "PKEY_INDEX"}, {event.AttrPort, "PORT"},
	{1 << 6, "QKEY"}, {event.AttrAV, "AV"}, {event.AttrPathMTU, "PATH_MTU"}, {event.AttrTimeout, "TIMEOUT"},
	{event.AttrRetryCnt, "RETRY_CNT"}, {event.AttrRNRRetry, "RNR_RETRY"}, {event.AttrRQPSN, "RQ_PSN"},
	{1 << 13, "MAX_QP_RD_ATOMIC"}, {event.AttrAltPath, "ALT_PATH"}, {event.AttrMinRNRTimer, "MIN_RNR_TIMER"},
	{event.AttrSQPSN, "SQ_PSN"}, {1 << 17, "MAX_DEST_RD_ATOMIC"}, {event.AttrPathMigState, "PATH_MIG_STATE"},
	{1 << 19, "CAP"}, {event.AttrDestQPN, "DEST_QPN"}, {1 << 21, "RESERVED1"}, {1 << 22, "RESERVED2"},
	{1 << 23, "RESERVED3"}, {1 << 24, "RESERVED4"}, {1 << 25, "RATE_LIMIT"},
}

// AttrNames names the bits of an ib_modify_qp attribute mask.
func AttrNames(mask uint32) []string {
	out := []string{}
	for _, a := range attrNames {
		if mask&a.bit != 0 {
			out = append(out, a.name)
			mask &^= a.bit
		}
	}
	for b := 0; mask != 0; b++ {
		if mask&(1<<b) != 0 {
			out = append(out, fmt.Sprintf("BIT%d", b))
			mask &^= 1 << b
		}
	}
	return out
}

// Errno names a negative return code ("EINVAL"); "" for 0 or unknown.
func Errno(ret int32) string {
	if ret >= 0 {
		return ""
	}
	return unix.ErrnoName(syscall.Errno(-ret))
}

var cmStates = []string{"IDLE", "LISTEN", "REQ_SENT", "REQ_RCVD", "MRA_REQ_SENT", "MRA_REQ_RCVD",
	"REP_SENT", "REP_RCVD", "MRA_REP_SENT", "MRA_REP_RCVD", "ESTABLISHED", "DREQ_SENT", "DREQ_RCVD",
	"TIMEWAIT", "SIDR_REQ_SENT", "SIDR_REQ_RCVD"}

var lapStates = []string{"UNINIT", "IDLE", "SENT", "RCVD", "MRA_LAP_SENT", "MRA_LAP_RCVD"}

// CMState names enum ib_cm_state.
func CMState(s uint8) string { return name(cmStates, s, "CM_STATE") }

// LapState names enum ib_cm_lap_state.
func LapState(s uint8) string { return name(lapStates, s, "LAP_STATE") }

func name(names []string, v uint8, prefix string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", prefix, v)
}

// GID formats a GID as an IPv6 address.
func GID(g [16]byte) string { return netip.AddrFrom16(g).String() }

func hex64(v uint64) string { return fmt.Sprintf("0x%x", v) }

func retText(ret int32) string {
	if ret == 0 {
		return "ret=0"
	}
	if n := Errno(ret); n != "" {
		return fmt.Sprintf("ret=%d %s", ret, n)
	}
	return fmt.Sprintf("ret=%d", ret)
}

func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}
