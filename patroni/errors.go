package patroni

import (
	"errors"
	"strings"
)

var (
	// ErrBodyTooLarge is wrapped by the error of a URL whose answer is
	// longer than ClientConfig.MaxBody.
	ErrBodyTooLarge = errors.New("answer too large")
	// ErrStatus is wrapped by the error of a URL that answered with a
	// status other than 200.
	ErrStatus = errors.New("unexpected HTTP status")
	// ErrNoUsableMember is wrapped by the error of a URL whose answer
	// lists no member that can be used.
	ErrNoUsableMember = errors.New("no usable member in the answer")
	// ErrNoMembers is Decode's error, or wrapped by it, when the answer
	// has no members list.
	ErrNoMembers = errors.New("patroni: the answer has no members list")
	// ErrWatching is returned by Watch when another Watch of the same
	// Source is running.
	ErrWatching = errors.New("patroni: the Source is already being watched")
)

// Error is returned by Client.Cluster when no URL gave a usable answer. It
// lists every URL with its failure, in the order the failures came.
type Error struct {
	URLs []*URLError
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("patroni: no API gave a usable answer to GET /cluster")
	for _, u := range e.URLs {
		b.WriteString("\n")
		b.WriteString(u.Error())
	}
	return b.String()
}

// Unwrap returns the failure of each URL, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.URLs))
	for i, u := range e.URLs {
		errs[i] = u
	}
	return errs
}

// URLError is the failure of one API URL.
type URLError struct {
	// URL is the address asked, without its user info.
	URL string
	Err error
}

func (e *URLError) Error() string { return e.URL + ": " + e.Err.Error() }

func (e *URLError) Unwrap() error { return e.Err }
