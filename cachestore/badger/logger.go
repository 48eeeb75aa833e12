package badger

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// badgerLogger routes Badger's logs to zerolog (it implements badger.Logger).
// Its level filtering is the zerolog logger's: Badger's own WithLoggingLevel
// would replace this logger, so it is never used.
type badgerLogger struct{ l zerolog.Logger }

// Errorf logs at error level.
func (a badgerLogger) Errorf(format string, args ...any) { emit(a.l.Error(), format, args) }

// Warningf logs at warn level.
func (a badgerLogger) Warningf(format string, args ...any) { emit(a.l.Warn(), format, args) }

// Infof logs at info level.
func (a badgerLogger) Infof(format string, args ...any) { emit(a.l.Info(), format, args) }

// Debugf logs at debug level.
func (a badgerLogger) Debugf(format string, args ...any) { emit(a.l.Debug(), format, args) }

// emit formats only when the level is enabled, and drops the trailing
// newline Badger puts on most messages.
func emit(e *zerolog.Event, format string, args []any) {
	if e == nil {
		return
	}
	e.Msg(strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}
