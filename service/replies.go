package service

import "context"

// Replies hands answers from the API to whatever waits for them: the
// ask_user tool's questions and the results of client tools. Its errors are
// the dispatcher's (an actors.Dispatcher's Answer and ClientResult return
// them as they are): actors.ErrNoPending when no question or client call
// with that id is waiting in the session (answered with 404),
// actors.ErrAlreadyAnswered when it was answered before (409),
// actors.ErrInvalidAnswer when the answer does not match what the question
// asks for (400 naming the fields; the question still waits).
// Implementations must be safe for concurrent use.
type Replies interface {
	// Answer answers the ask_user question of call callID in session.
	Answer(ctx context.Context, session, callID, text string) error
	// ClientResult hands back the result of a client tool's call.
	ClientResult(ctx context.Context, session, callID string, content string, isError bool) error
}

// DeclineReplies is implemented by a Replies that can decline a question
// (a request for input from an MCP server) instead of answering it.
type DeclineReplies interface {
	Decline(ctx context.Context, session, callID string) error
}

// SecretReplies is implemented by a Replies that can answer store_secret
// with the origins the human kept (a subset of those asked about).
type SecretReplies interface {
	AnswerSecret(ctx context.Context, session, callID, value string, origins []string) error
}
