package hcacheck

import (
	"errors"

	"github.com/apmwatch/apmwatch/internal/uverbs"
	"golang.org/x/sys/unix"
)

// The decisions, one per point: from what was seen to the answer. Pure,
// so that each table is unit-tested on its own.

// Answers shared by several points.
const (
	AnsRefuse  = "refuse" // the modify failed with EINVAL
	AnsAccept  = "accept" // the modify returned 0
	AnsError   = "error"  // the modify failed with another errno
	AnsNotRun  = "not-run"
	AnsNone    = "none"
	AnsInside  = "inside"
	AnsAfter   = "after"
	AnsCopy    = "copy"
	AnsZero    = "zero"
	AnsSwap    = "swap"
	AnsOther   = "other"
	AnsSame    = "copy-or-swap" // primary and alternate were the same path: no telling
	AnsRetry   = "retry"
	AnsPMErr   = "pathmig-err"
	AnsRaised  = "raised"
	AnsBoth    = "both"
	AnsRespOnl = "responder-only"
	AnsReqOnly = "requester-only"
	AnsNeither = "neither"
)

// errnoName is the errno's symbol ("EINVAL"), "0" for success, or the
// error's text when it carries no errno.
func errnoName(err error) string {
	if err == nil {
		return "0"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return err.Error()
}

// decideModify maps a modify's result: EINVAL is a refusal (what rdmavt
// and IBTA give), 0 an acceptance, any other errno an error.
func decideModify(err error) string {
	switch {
	case err == nil:
		return AnsAccept
	case errors.Is(err, unix.EINVAL):
		return AnsRefuse
	}
	return AnsError
}

// decideForcedEvent: PATH_MIG on the forcing QP already readable when the
// modify returned is "inside", one that came later (within the wait)
// "after", none "none".
func decideForcedEvent(atReturn, later bool) string {
	switch {
	case atReturn:
		return AnsInside
	case later:
		return AnsAfter
	}
	return AnsNone
}

// path is the part of an address vector that tells paths apart.
type path struct {
	Port uint8
	DLID uint16
	Bits uint8 // src_path_bits (LMC paths)
}

func primaryOf(a uverbs.Attr) path {
	return path{Port: a.PortNum, DLID: a.Dest.DLID, Bits: a.Dest.SrcPathBits}
}

func alternateOf(a uverbs.Attr) path {
	return path{Port: a.AltPortNum, DLID: a.AltDest.DLID, Bits: a.AltDest.SrcPathBits}
}

// decideAlt reads the alternate a query gives after a migration from
// oldPrimary: zero (no port or no DLID), a copy of the new primary (IBTA),
// the old primary (a swap), or something else. When the old primary was
// the alternate's own path, copy and swap look the same.
func decideAlt(after uverbs.Attr, oldPrimary path) string {
	alt, cur := alternateOf(after), primaryOf(after)
	switch {
	case alt.Port == 0 || alt.DLID == 0:
		return AnsZero
	case alt == cur && cur == oldPrimary:
		return AnsSame
	case alt == cur:
		return AnsCopy
	case alt == oldPrimary:
		return AnsSwap
	}
	return AnsOther
}

// decideOneWay: after both ends rearmed and only the requester sent, which
// of them read ARMED.
func decideOneWay(reqArmed, respArmed bool) string {
	switch {
	case reqArmed && respArmed:
		return AnsBoth
	case respArmed:
		return AnsRespOnl
	case reqArmed:
		return AnsReqOnly
	}
	return AnsNeither
}

// deadSeen is what the requester showed once its peer stopped answering
// and its alternate led nowhere.
type deadSeen struct {
	PathMig, PathMigErr bool // async events on the requester
	RetryExc            bool // its send completed with RETRY_EXC_ERR
	Err                 bool // it reads ERR
}

// decideDeadAlt: PATH_MIG_ERR is "pathmig-err" (whatever follows);
// PATH_MIG then death (RETRY_EXC_ERR or ERR) is "retry" (IBTA, rdmavt);
// otherwise what was seen, which is no knob value.
func decideDeadAlt(s deadSeen) string {
	dead := s.RetryExc || s.Err
	switch {
	case s.PathMigErr:
		return AnsPMErr
	case s.PathMig && dead:
		return AnsRetry
	case s.PathMig:
		return "pathmig-only"
	case dead:
		return "died-unmigrated"
	}
	return AnsNone
}

// knobValues are the lab HCA's knobs and the answers that are values of
// them (lab-ib knob).
var knobValues = map[string][]string{
	PtArmedModify: {AnsRefuse, AnsAccept},
	PtForcedEvent: {AnsNone, AnsInside, AnsAfter},
	PtAltAfterMig: {AnsCopy, AnsZero},
	PtDeadAlt:     {AnsRetry, AnsPMErr},
	PtUnloadedAlt: {"0", "1"},
}

// knobs maps the points' answers onto the knobs; an answer that is no
// value of its knob leaves the knob out.
func knobs(points []Point) map[string]string {
	m := map[string]string{}
	for _, p := range points {
		for _, v := range knobValues[p.Point] {
			if p.Answer == v {
				m[p.Point] = v
			}
		}
	}
	return m
}
