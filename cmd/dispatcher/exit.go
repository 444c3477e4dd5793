package main

import (
	"errors"
	"fmt"
)

// ExitCode is the status the binary exits with. Each value has one meaning,
// listed in `dispatcher --help`, so scripts can branch on it.
type ExitCode int

// The exit codes of the binary.
const (
	// ExitOK: the command did what it was asked.
	ExitOK ExitCode = 0
	// ExitError: an error not covered below.
	ExitError ExitCode = 1
	// ExitUsage: bad flags, arguments or configuration file.
	ExitUsage ExitCode = 2
	// ExitUnavailable: the cluster (or a member's HTTP API) could not be
	// reached within the timeout.
	ExitUnavailable ExitCode = 3
	// ExitAuditFailed: `log` (or `demo`) found the command log
	// inconsistent.
	ExitAuditFailed ExitCode = 4
	// ExitNoLeader: `status` found no member holding a live lease.
	ExitNoLeader ExitCode = 5
	// ExitMisconfigured: `topics` found a topic whose settings break a
	// guarantee, and did not (or could not) fix it.
	ExitMisconfigured ExitCode = 6
	// ExitCommandFailed: `submit --wait` or `resolve` saw the command end in
	// a state other than succeeded.
	ExitCommandFailed ExitCode = 7
	// ExitUnknownRole: `status` or `log` found no record of the role in the
	// coordination topic: no member has ever registered for it.
	ExitUnknownRole ExitCode = 8
)

// exitCodeHelp is the table `dispatcher --help` prints.
const exitCodeHelp = `Exit codes:
  0  ok
  1  error
  2  usage: bad flags, arguments or configuration file
  3  unavailable: the cluster or the member's HTTP API could not be reached
  4  audit failed: log (or demo) found the command log inconsistent
  5  no leader: status found no member holding a live lease
  6  misconfigured: topics found a topic whose settings break a guarantee
  7  command failed: submit --wait or resolve saw a state other than succeeded
  8  unknown role: status or log found that no member ever registered for the
     role (check --role or the config's role; roles are case-sensitive)
`

// exitError carries an exit code with the error that caused it.
type exitError struct {
	code ExitCode
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode attaches an exit code to err; nil stays nil.
func withCode(code ExitCode, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageErrorf builds an ExitUsage error.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// codeOf returns the exit code an error carries, ExitError when none.
func codeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitError
}
