package hcacheck

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/apmwatch/apmwatch/internal/uverbs"
	"golang.org/x/sys/unix"
)

// rawBackend drives a device through the legacy write() commands of its
// /dev/infiniband/uverbsN file, as lab/progs/uverbs.c does: no provider
// library, no driver data.
type rawBackend struct {
	sys, dev  string // sysfs root, /dev root
	fd, async int
}

// NewRaw returns the raw uverbs backend reading sysfs under sys and device
// files under dev ("/sys" and "/dev" on a host).
func NewRaw(sys, dev string) Backend { return &rawBackend{sys: sys, dev: dev, fd: -1, async: -1} }

// uverbsNode finds uverbsN whose ibdev is dev.
func uverbsNode(sys, dev string) (string, error) {
	dir := filepath.Join(sys, "class", "infiniband_verbs")
	es, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("no uverbs devices (%w): is ib_uverbs loaded?", err)
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "ibdev"))
		if err == nil && strings.TrimSpace(string(b)) == dev {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("%s has no uverbs device under %s: is ib_uverbs loaded?", dev, dir)
}

func (r *rawBackend) Open(dev string) error {
	node, err := uverbsNode(r.sys, dev)
	if err != nil {
		return err
	}
	path := filepath.Join(r.dev, "infiniband", node)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	r.fd = fd
	resp, err := r.cmd("GET_CONTEXT", uverbs.CmdGetContext, uverbs.GetContext, uverbs.GetContextRespSize)
	if err != nil {
		return err
	}
	c, err := uverbs.ParseContextResp(resp)
	if err != nil {
		return err
	}
	r.async = int(c.AsyncFD)
	return nil
}

// cmd writes one command whose body body(resp) builds around the user
// address of a respLen-byte answer buffer, and returns that buffer. The
// buffer is pinned while the kernel may write it.
func (r *rawBackend) cmd(name string, cmd uint32, body func(resp uint64) []byte, respLen int) ([]byte, error) {
	if r.fd < 0 {
		return nil, fmt.Errorf("%s: the device is not open", name)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	var resp []byte
	var addr uint64
	if respLen > 0 {
		resp = make([]byte, respLen)
		pin.Pin(&resp[0])
		addr = uint64(uintptr(unsafe.Pointer(&resp[0])))
	}
	b, err := uverbs.Header(cmd, body(addr), respLen)
	if err != nil {
		return nil, err
	}
	n, err := unix.Write(r.fd, b)
	runtime.KeepAlive(resp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if n != len(b) {
		return nil, fmt.Errorf("%s: wrote %d of %d bytes", name, n, len(b))
	}
	return resp, nil
}

func handleOf(resp []byte, err error) (uint32, error) {
	if err != nil {
		return 0, err
	}
	if len(resp) < 4 {
		return 0, errors.New("short answer")
	}
	return uint32(resp[0]) | uint32(resp[1])<<8 | uint32(resp[2])<<16 | uint32(resp[3])<<24, nil
}

func (r *rawBackend) AllocPD() (uint32, error) {
	return handleOf(r.cmd("ALLOC_PD", uverbs.CmdAllocPD, uverbs.AllocPD, uverbs.AllocPDRespSize))
}

func (r *rawBackend) CreateCQ(cqe uint32) (uint32, error) {
	return handleOf(r.cmd("CREATE_CQ", uverbs.CmdCreateCQ, func(p uint64) []byte {
		return uverbs.CreateCQ(p, 0, cqe)
	}, uverbs.CreateCQRespSize))
}

// qpCaps: room for the few sends and receives the check posts.
var qpCaps = uverbs.QPCaps{MaxSendWR: 16, MaxRecvWR: 32, MaxSendSGE: 1, MaxRecvSGE: 1}

func (r *rawBackend) CreateQP(pd, cq uint32, userHandle uint64) (QP, error) {
	resp, err := r.cmd("CREATE_QP", uverbs.CmdCreateQP, func(p uint64) []byte {
		return uverbs.CreateRCQP(p, userHandle, pd, cq, cq, qpCaps, false)
	}, uverbs.CreateQPRespSize)
	if err != nil {
		return QP{}, err
	}
	q, err := uverbs.ParseQPResp(resp)
	return QP{Handle: q.Handle, QPN: q.QPN}, err
}

func (r *rawBackend) Modify(m *uverbs.Modify) error {
	_, err := r.cmd("MODIFY_QP", uverbs.CmdModifyQP, func(uint64) []byte { return m.Marshal() }, 0)
	return err
}

// queryMask asks for everything (drivers answer what they have).
const queryMask = 0x1fffff

func (r *rawBackend) Query(qp uint32) (uverbs.Attr, error) {
	resp, err := r.cmd("QUERY_QP", uverbs.CmdQueryQP, func(p uint64) []byte {
		return uverbs.MarshalQuery(p, qp, queryMask)
	}, uverbs.QueryQPRespSize)
	if err != nil {
		return uverbs.Attr{}, err
	}
	return uverbs.ParseQueryResp(resp)
}

func (r *rawBackend) PostSend(qp uint32, wrID uint64) error {
	_, err := r.cmd("POST_SEND", uverbs.CmdPostSend, func(p uint64) []byte {
		return uverbs.PostSend(p, qp, wrID)
	}, uverbs.PostSendRespSize)
	return err
}

func (r *rawBackend) PostRecv(qp uint32, wrID uint64) error {
	_, err := r.cmd("POST_RECV", uverbs.CmdPostRecv, func(p uint64) []byte {
		return uverbs.PostRecv(p, qp, wrID)
	}, uverbs.PostRecvRespSize)
	return err
}

const pollBatch = 16

func (r *rawBackend) Poll(cq uint32) ([]uverbs.WC, error) {
	resp, err := r.cmd("POLL_CQ", uverbs.CmdPollCQ, func(p uint64) []byte {
		return uverbs.PollCQ(p, cq, pollBatch)
	}, uverbs.PollCQRespSize+pollBatch*uverbs.WCSize)
	if err != nil {
		return nil, err
	}
	return uverbs.ParsePollResp(resp)
}

func (r *rawBackend) NextEvent(wait time.Duration) (uverbs.AsyncEvent, bool, error) {
	if r.async < 0 {
		return uverbs.AsyncEvent{}, false, errors.New("the device is not open")
	}
	ms := int(wait / time.Millisecond)
	if wait > 0 && ms == 0 {
		ms = 1
	}
	pfd := []unix.PollFd{{Fd: int32(r.async), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, ms)
	if errors.Is(err, unix.EINTR) {
		return uverbs.AsyncEvent{}, false, nil
	}
	if err != nil {
		return uverbs.AsyncEvent{}, false, fmt.Errorf("polling the async event file: %w", err)
	}
	if n == 0 || pfd[0].Revents&unix.POLLIN == 0 {
		return uverbs.AsyncEvent{}, false, nil
	}
	b := make([]byte, uverbs.AsyncEventDescSize)
	if _, err := unix.Read(r.async, b); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return uverbs.AsyncEvent{}, false, nil
		}
		return uverbs.AsyncEvent{}, false, fmt.Errorf("reading the async event file: %w", err)
	}
	ev, err := uverbs.ParseAsyncEvent(b)
	return ev, err == nil, err
}

func (r *rawBackend) DestroyQP(qp uint32) error {
	_, err := r.cmd("DESTROY_QP", uverbs.CmdDestroyQP, func(p uint64) []byte {
		return uverbs.DestroyQP(p, qp)
	}, uverbs.DestroyQPRespSize)
	return err
}

func (r *rawBackend) DestroyCQ(cq uint32) error {
	_, err := r.cmd("DESTROY_CQ", uverbs.CmdDestroyCQ, func(p uint64) []byte {
		return uverbs.DestroyCQ(p, cq)
	}, uverbs.DestroyCQRespSize)
	return err
}

func (r *rawBackend) DeallocPD(pd uint32) error {
	_, err := r.cmd("DEALLOC_PD", uverbs.CmdDeallocPD, func(uint64) []byte { return uverbs.DeallocPD(pd) }, 0)
	return err
}

func (r *rawBackend) Close() error {
	var errs []error
	if r.async >= 0 {
		errs = append(errs, unix.Close(r.async))
		r.async = -1
	}
	if r.fd >= 0 {
		errs = append(errs, unix.Close(r.fd))
		r.fd = -1
	}
	return errors.Join(errs...)
}
