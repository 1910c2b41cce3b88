package event

import "fmt"

// MaxQPN is the largest QP number: QPNs have 24 bits.
const MaxQPN = 1<<24 - 1

// MaxPID is the largest process id Linux hands out (PID_MAX_LIMIT).
const MaxPID = 1 << 22

// CheckQPN refuses a --qpn value that cannot name a QP.
func CheckQPN(n uint32) error {
	if n > MaxQPN {
		return fmt.Errorf("bad --qpn %d: qp numbers have 24 bits (at most %d)", n, MaxQPN)
	}
	return nil
}

// CheckPID refuses a --pid value that cannot name a process.
func CheckPID(n int64) error {
	if n <= 0 || n > MaxPID {
		return fmt.Errorf("bad --pid %d: want a process id from 1 to %d", n, MaxPID)
	}
	return nil
}
