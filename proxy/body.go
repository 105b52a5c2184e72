package proxy

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
)

// Reading request bodies: within a limit, into recycled buffers.

var errTooLarge = errors.New("body too large")

// readLimited reads the whole body, never more than limit+1 bytes, into a
// recycled buffer: the caller hands it back with putBody once done, and
// copies out the body it keeps (only a verified event's is kept, so the
// bodies of refused requests leave no garbage behind).
func readLimited(r *http.Request, limit int64) ([]byte, *[]byte, error) {
	if r.ContentLength > limit {
		return nil, nil, errTooLarge
	}
	// One byte past the limit tells an oversize body; never past what an
	// int64 holds, whatever limit is configured.
	n := limit
	if n < math.MaxInt64 {
		n++
	}
	buf := getBody(r.ContentLength)
	b, err := readAllInto((*buf)[:0], io.LimitReader(r.Body, n), n)
	*buf = b
	if err != nil {
		putBody(buf)
		return nil, nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		putBody(buf)
		return nil, nil, errTooLarge
	}
	return b, buf, nil
}

// bodyBuffers recycles the buffers bodies are read into.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// pooledBodyMax is the largest buffer kept for reuse: bigger bodies are
// rare, and a pool of them would hold memory for nothing.
const pooledBodyMax = 256 << 10

// getBody returns a buffer with room for a declared length (plus the byte
// that tells an oversize body): what the budget reserved, allocated once.
func getBody(declared int64) *[]byte {
	if declared > pooledBodyMax {
		b := make([]byte, 0, declared+1)
		return &b
	}
	buf := bodyBuffers.Get().(*[]byte)
	if declared >= 0 && int64(cap(*buf)) < declared+1 {
		*buf = make([]byte, 0, declared+1)
	}
	return buf
}

// putBody hands a buffer back for reuse (nil is ignored).
func putBody(buf *[]byte) {
	if buf == nil || cap(*buf) > pooledBodyMax {
		return
	}
	*buf = (*buf)[:0]
	bodyBuffers.Put(buf)
}

// readAllInto is io.ReadAll appending to b, never growing b's capacity
// past maxCap (what the body budget reserved: a body of undeclared length
// must not take more than that while it is read).
func readAllInto(b []byte, r io.Reader, maxCap int64) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			grown := min(max(int64(cap(b))*2, 512), maxCap)
			if grown <= int64(cap(b)) {
				grown = int64(cap(b)) + 1 // at the cap: one more byte tells an oversize body
			}
			nb := make([]byte, len(b), grown)
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
