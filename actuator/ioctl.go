package actuator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ioctler runs one RDMA_VERBS_IOCTL. The real one is a syscall on the
// borrowed file; tests use a fake.
type ioctler interface {
	ioctl(object, method uint16, attrs func(ptr func([]byte) uint64) []attr) error
}

// fdIoctl runs the ioctl on a file descriptor with a device's driver id.
type fdIoctl struct {
	fd       int
	driverID uint32
}

// ioctl builds the attributes with ptr (which pins each buffer it is given
// and returns its address) and runs the ioctl. The buffers stay pinned until
// the call returns, so the kernel reads and writes Go memory safely.
func (f *fdIoctl) ioctl(object, method uint16, build func(ptr func([]byte) uint64) []attr) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	ptr := func(b []byte) uint64 {
		if len(b) == 0 {
			return 0
		}
		pin.Pin(&b[0])
		return uint64(uintptr(unsafe.Pointer(&b[0])))
	}
	hdr := encodeIoctl(object, method, f.driverID, build(ptr))
	pin.Pin(&hdr[0])
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(f.fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(&hdr[0])))
	runtime.KeepAlive(hdr)
	if e != 0 {
		return e
	}
	return nil
}

// invokeWrite runs a legacy write() command through
// UVERBS_METHOD_INVOKE_WRITE: in is the command body without the 8-byte
// write header, out (may be nil) receives the response.
func invokeWrite(io ioctler, cmd uint32, in, out []byte) error {
	return io.ioctl(objectDevice, methodInvokeWrit, func(ptr func([]byte) uint64) []attr {
		return invokeWriteAttrs(cmd, ptr(in), len(in), ptr(out), len(out))
	})
}

// queryQP runs QUERY_QP on a handle.
func queryQP(io ioctler, handle uint32) (Attr, error) {
	out := make([]byte, queryQPRespSize)
	if err := invokeWrite(io, cmdQueryQP, marshalQuery(handle, queryMask), out); err != nil {
		return Attr{}, err
	}
	return parseQueryResp(out)
}

// queryMask asks for everything the actuator shows (drivers may ignore it).
const queryMask = 1<<0 | 1<<4 | 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<12 | 1<<14 | 1<<16 | 1<<18 | 1<<20

// modifyQP runs MODIFY_QP.
func modifyQP(io ioctler, m *Modify) error {
	return invokeWrite(io, cmdModifyQP, m.Marshal(), nil)
}

// listHandles asks UVERBS_METHOD_INFO_HANDLES for the ids of every QP object
// of the borrowed file (drivers/infiniband/core/uverbs_std_types_device.c:
// OBJECT_ID const in, TOTAL_HANDLES u32 out, HANDLES_LIST u32[] out).
func listHandles(io ioctler, max int) ([]uint32, error) {
	total := make([]byte, 4)
	list := make([]byte, 4*max)
	err := io.ioctl(objectDevice, methodInfoHandle, func(ptr func([]byte) uint64) []attr {
		return []attr{
			{id: attrInfoObjectID, len: 8, flags: attrFMandatory, data: objectQP},
			{id: attrInfoTotal, len: 4, flags: attrFMandatory, data: ptr(total)},
			{id: attrInfoList, len: uint16(len(list)), flags: attrFMandatory, data: ptr(list)},
		}
	})
	if err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(total))
	if n > max {
		n = max
	}
	hs := make([]uint32, n)
	for i := range hs {
		hs[i] = binary.LittleEndian.Uint32(list[4*i:])
	}
	return hs, nil
}

// probeDriverID finds the driver id the device behind fd accepts: a method
// that does not exist answers EPROTONOSUPPORT once the driver id matched
// and EINVAL while it does not (uverbs_ioctl.c checks the id first). It
// changes nothing. guess is tried first.
func probeDriverID(fd int, guess uint32) (uint32, error) {
	try := func(id uint32) (bool, error) {
		f := &fdIoctl{fd: fd, driverID: id}
		err := f.ioctl(objectDevice, 0x7ff, func(func([]byte) uint64) []attr { return nil })
		switch {
		case errors.Is(err, unix.EPROTONOSUPPORT):
			return true, nil
		case errors.Is(err, unix.EINVAL):
			return false, nil
		case err == nil:
			return false, fmt.Errorf("probing the driver id: a nonexistent method succeeded")
		}
		return false, fmt.Errorf("probing the driver id: %w", err)
	}
	if ok, err := try(guess); ok || err != nil {
		return guess, err
	}
	for id := uint32(0); id <= maxDriverID+8; id++ {
		if id == guess {
			continue
		}
		if ok, err := try(id); ok || err != nil {
			return id, err
		}
	}
	return 0, errors.New("no driver id accepted by the device")
}
