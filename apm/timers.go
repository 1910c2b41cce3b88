package apm

// timer wakes the QP in a slot at a Boot time. The QP may be gone since:
// the slot's timerAt must still equal when.
type timer struct {
	when uint64
	slot int32
}

// timers is a binary min-heap on when.
type timers []timer

func (h *timers) push(t timer) {
	*h = append(*h, t)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].when <= s[i].when {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *timers) peek() (timer, bool) {
	if len(*h) == 0 {
		return timer{}, false
	}
	return (*h)[0], true
}

func (h *timers) pop() timer {
	s := *h
	t := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && s[r].when < s[l].when {
			m = r
		}
		if s[i].when <= s[m].when {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	if cap(s) > 1024 && n < cap(s)/4 {
		s = append(make([]timer, 0, cap(s)/2), s...)
	}
	*h = s
	return t
}
