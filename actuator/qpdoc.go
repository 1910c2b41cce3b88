package actuator

import (
	"encoding/json"
	"io"
	"time"

	"github.com/apmwatch/apmwatch/event"
	"github.com/apmwatch/apmwatch/internal/escape"
)

// DocSchema is the version of `qp list -o json` and `qp show -o json`
// (docs/actuator.md, "qp list and qp show as JSON"): fields are only added
// within a version.
const DocSchema = 1

// ListDoc is `qp list -o json`: one document, every row of the table.
type ListDoc struct {
	Schema int   `json:"schema"`
	QPs    []Row `json:"qps"`
}

// ShowDoc is `qp show -o json`: one document, the QP's rdma netlink row
// and, for a user QP, its owner's view through QUERY_QP.
type ShowDoc struct {
	Schema int        `json:"schema"`
	QP     Row        `json:"qp"`
	Owner  *OwnerView `json:"owner_view,omitempty"`
}

// OwnerView is what QUERY_QP on the owner's borrowed uverbs file said,
// enums as names.
type OwnerView struct {
	Target       Target        `json:"target"`
	State        string        `json:"qp_state"`       // RESET ... ERR
	PathMigState string        `json:"path_mig_state"` // MIGRATED, REARM, ARMED
	PathMTU      int           `json:"path_mtu"`       // bytes (256 ... 4096); 0 unknown
	DestQPN      uint32        `json:"dest_qp_num"`
	SQPSN        uint32        `json:"sq_psn"`
	RQPSN        uint32        `json:"rq_psn"`
	Primary      PathView      `json:"primary"`
	Alt          PathView      `json:"alt"`
	Took         time.Duration `json:"took_ns"`
}

// PathView is one of a QP's paths as QUERY_QP gives it.
type PathView struct {
	Port      uint8  `json:"port"`
	DLID      uint16 `json:"dlid"`
	PathBits  uint8  `json:"src_path_bits"`
	SL        uint8  `json:"sl"`
	PKeyIndex uint16 `json:"pkey_index"`
	Timeout   uint8  `json:"timeout"`
	Global    bool   `json:"is_global"`
	DGID      string `json:"dgid,omitempty"` // an IPv6 address, when global
	SGIDIndex uint8  `json:"sgid_index"`
	HopLimit  uint8  `json:"hop_limit"`
}

// mtuBytes names enum ib_mtu (1: 256 ... 5: 4096).
func mtuBytes(m uint8) int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

func pathView(d Dest, port, timeout uint8, pkey uint16) PathView {
	p := PathView{Port: port, DLID: d.DLID, PathBits: d.SrcPathBits, SL: d.SL, PKeyIndex: pkey, Timeout: timeout, Global: d.IsGlobal,
		SGIDIndex: d.SGIDIndex, HopLimit: d.HopLimit}
	if d.IsGlobal {
		p.DGID = gidString(d.DGID)
	}
	return p
}

// NewShowDoc makes `qp show`'s document from its row and, for a user QP,
// the query's result.
func NewShowDoc(row Row, res *Result) ShowDoc {
	doc := ShowDoc{Schema: DocSchema, QP: row}
	if res == nil || res.Before == nil {
		return doc
	}
	a := res.Before
	primaryPort := a.PortNum
	if primaryPort == 0 {
		primaryPort = a.Dest.PortNum
	}
	altPort := a.AltPortNum
	if altPort == 0 {
		altPort = a.AltDest.PortNum
	}
	doc.Owner = &OwnerView{Target: res.Target, State: event.QPState(a.State).String(),
		PathMigState: event.MigState(a.PathMigState).String(), PathMTU: mtuBytes(a.PathMTU),
		DestQPN: a.DestQPN, SQPSN: a.SQPSN, RQPSN: a.RQPSN,
		Primary: pathView(a.Dest, primaryPort, a.Timeout, a.PKeyIndex),
		Alt:     pathView(a.AltDest, altPort, a.AltTimeout, a.AltPKeyIndex), Took: res.Took}
	return doc
}

// WriteDoc writes one document as one line of JSON, its host strings
// escaped.
func WriteDoc(w io.Writer, doc any) error { return json.NewEncoder(w).Encode(escape.Value(doc)) }
