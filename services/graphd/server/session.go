package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/worldgate/worldgate/services/graphd/graph"
	gb "github.com/worldgate/worldgate/services/graphd/graphbinary"
	"github.com/worldgate/worldgate/services/graphd/store"
	"github.com/worldgate/worldgate/services/graphd/traversal"
)

// Sessions and transactions as Gremlin Server offers them to its clients
// (gremlin-go's g.Tx(): Begin opens a connection whose requests carry a
// session id, processor "session"; Commit and Rollback send the bytecode
// g.tx().commit() / g.tx().rollback(); closing sends op "close"). A session
// is one transaction at a time: its writes are kept apart from the graph
// until commit (see store.Pending for the isolation), a rollback, a close,
// the session's connections closing or DefaultSessionTimeout of idleness
// discard them, and a crash leaves nothing of them (nothing reaches the WAL
// before the commit). After a commit or rollback the session starts a new
// transaction with its next traversal.

// DefaultSessionTimeout is how long an idle session keeps its transaction.
const DefaultSessionTimeout = 10 * time.Minute

// maxEndedSessions bounds the sessions remembered as ended.
const maxEndedSessions = 10000

// maxPendingOps bounds one transaction's writes.
const maxPendingOps = 1 << 20

type session struct {
	id    string
	mu    sync.Mutex // one request of a session at a time, as Gremlin Server runs them
	st    *store.Store
	user  string
	ops   []any // the open transaction's writes
	conns map[*conn]bool
	timer *time.Timer
	gone  bool
}

// sessionFor finds or opens the session id for c's request on store st.
func (s *Server) sessionFor(c *conn, id string, st *store.Store, user string) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[string]*session{}
	}
	if why, ended := s.endedSessions[id]; ended {
		return nil, &traversal.Error{Code: gb.StatusServerError, Msg: fmt.Sprintf("session %s has ended (%s); its transaction was rolled back: begin a new one", id, why)}
	}
	ss := s.sessions[id]
	if ss == nil {
		ss = &session{id: id, st: st, user: user, conns: map[*conn]bool{}}
		ss.timer = time.AfterFunc(s.sessionTimeout(), func() { s.endSession(ss, "idle timeout") })
		s.sessions[id] = ss
	}
	if ss.user != user {
		return nil, &accessError{code: gb.StatusForbidden, msg: fmt.Sprintf("session %s belongs to another user", id)}
	}
	if ss.st != st {
		return nil, &accessError{code: gb.StatusInvalidArguments, msg: fmt.Sprintf("session %s is bound to another traversal source", id)}
	}
	ss.conns[c] = true
	ss.timer.Reset(s.sessionTimeout())
	return ss, nil
}

func (s *Server) sessionTimeout() time.Duration {
	if s.cfg.SessionTimeout > 0 {
		return s.cfg.SessionTimeout
	}
	return DefaultSessionTimeout
}

// endSession discards a session and its open transaction.
func (s *Server) endSession(ss *session, why string) {
	s.mu.Lock()
	if s.sessions[ss.id] == ss {
		delete(s.sessions, ss.id)
	}
	if why != "closed by the client" {
		// Remember it, so a later request of the session is told rather
		// than silently given a new, empty transaction.
		if s.endedSessions == nil {
			s.endedSessions = map[string]string{}
		}
		for k := range s.endedSessions {
			if len(s.endedSessions) < maxEndedSessions {
				break
			}
			delete(s.endedSessions, k)
		}
		s.endedSessions[ss.id] = why
	}
	s.mu.Unlock()
	ss.timer.Stop()
	ss.mu.Lock()
	if !ss.gone && len(ss.ops) > 0 {
		s.log.Info("graphd: session ended, its transaction rolled back", "session", ss.id, "reason", why, "operations", len(ss.ops))
	}
	ss.gone, ss.ops = true, nil
	ss.mu.Unlock()
}

// dropConnSessions ends the sessions whose last connection c was.
func (s *Server) dropConnSessions(c *conn) {
	s.mu.Lock()
	var ended []*session
	for _, ss := range s.sessions {
		if ss.conns[c] {
			delete(ss.conns, c)
			if len(ss.conns) == 0 {
				ended = append(ended, ss)
			}
		}
	}
	s.mu.Unlock()
	for _, ss := range ended {
		s.endSession(ss, "connection closed")
	}
}

// txOp returns "commit" or "rollback" when bc is g.tx().commit()/rollback().
func txOp(bc *gb.Bytecode) (string, bool) {
	if len(bc.Steps) != 0 || len(bc.Sources) != 1 || bc.Sources[0].Op != "tx" || len(bc.Sources[0].Args) != 1 {
		return "", false
	}
	op, _ := bc.Sources[0].Args[0].(string)
	return op, op == "commit" || op == "rollback"
}

// finishTx commits or rolls back the session's transaction.
func (s *Server) finishTx(ss *session, op string, timeout time.Duration) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone {
		return &traversal.Error{Code: gb.StatusServerError, Msg: fmt.Sprintf("session %s has ended (timed out or closed); its transaction was rolled back", ss.id)}
	}
	ops := ss.ops
	ss.ops = nil
	if op == "rollback" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := ss.st.Commit(ctx, ops); err != nil {
		var ce *store.ConflictError
		if errors.As(err, &ce) {
			return &traversal.Error{Code: gb.StatusServerError, Msg: ce.Error()}
		}
		return &traversal.Error{Code: gb.StatusServerError, Msg: "commit failed: " + err.Error() + "; nothing of the transaction was applied"}
	}
	return nil
}

// executeInSession runs a traversal in the session's open transaction.
func (s *Server) executeInSession(ss *session, bc *gb.Bytecode, user *User, timeout time.Duration, includeProps bool) (results, error) {
	t, mutating, err := s.compile(bc, user)
	if err != nil {
		return results{}, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.gone {
		return results{}, &traversal.Error{Code: gb.StatusServerError, Msg: fmt.Sprintf("session %s has ended (timed out or closed); its transaction was rolled back", ss.id)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	lim := s.limits()
	var res results
	if !mutating && len(ss.ops) == 0 {
		err = ss.st.Read(func(g *graph.Graph) error {
			var err error
			res.vals, res.bulks, err = t.ExecuteBulk(ctx, g, nil, lim, includeProps)
			return err
		})
		return res, err
	}
	added, err := ss.st.Pending(ctx, ss.ops, func(g *graph.Graph, tx *graph.Tx) error {
		var err error
		res.vals, res.bulks, err = t.ExecuteBulk(ctx, g, tx, lim, includeProps)
		return err
	})
	if err != nil {
		var ce *store.ConflictError
		if errors.As(err, &ce) {
			// The transaction cannot go on: a committed write removed what
			// it changed.
			ss.ops = nil
			return results{}, &traversal.Error{Code: gb.StatusServerError, Msg: ce.Error() + " (the transaction was rolled back)"}
		}
		return results{}, err
	}
	if len(ss.ops)+len(added) > maxPendingOps {
		return results{}, &traversal.Error{Code: gb.StatusEvaluation, Msg: fmt.Sprintf("the transaction would hold more than %d writes; commit it in parts", maxPendingOps)}
	}
	ss.ops = append(ss.ops, added...)
	return res, nil
}
