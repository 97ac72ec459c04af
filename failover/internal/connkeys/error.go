package connkeys

import "strconv"

// Error is a value of one of the keys that [Read] cannot use. Msg may
// still hold a secret the caller knows of (see the package doc):
// failover.ParseConfig turns it into a *failover.ConfigError, scrubbed,
// in one place.
type Error struct {
	Key string // the key at fault
	Msg string // what is wrong, the value quoted where there is one
	Err error  // the cause, if any; its text is not part of Msg
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// fail reports key at fault with msg.
func fail(key, msg string, err error) *Error {
	return &Error{Key: key, Msg: msg, Err: err}
}

// badValue reports a bad value of key, quoting the value.
func badValue(key, value, problem string, err error) *Error {
	return fail(key, strconv.Quote(value)+" "+problem, err)
}
