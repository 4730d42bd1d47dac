package store

import (
	"context"
	"fmt"

	"github.com/worldgate/worldgate/services/graphd/graph"
)

// Session transactions (Gremlin Server sessions, g.tx() in a client) keep
// their writes out of the graph until they commit: a transaction is the list
// of redo operations its traversals made. Each of its traversals runs under
// the write lock on the graph as those operations leave it (Pending), and the
// operations are undone again before the lock is released, so no other
// traversal ever sees them; Commit replays them as one durable write (one
// WAL record: all or nothing, also across a crash). Nothing is held between
// a transaction's requests, so an open transaction blocks no one.
//
// Isolation: each traversal of a transaction sees the latest committed graph
// plus the transaction's own writes (read committed, read your writes).
// Commit replays the recorded writes (property values, not the traversals
// that computed them) on the graph as it is then: a property two transactions
// set ends with the value of the last to commit, and a write on an element
// another transaction removed (or an id another one took) fails the commit
// with a ConflictError, leaving the graph untouched.

// ConflictError is a transaction's write that no longer applies: its
// element was removed or its id taken by a write committed since.
type ConflictError struct{ Err error }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the transaction conflicts with a write committed since it started: %v; nothing of the transaction was applied", e.Err)
}

func (e *ConflictError) Unwrap() error { return e.Err }

// Pending runs fn on the graph with the operations pending applied, without
// committing anything: it returns the operations fn added (nil when fn
// fails, whose changes are undone like the pending ones). Ids fn or the
// pending operations generated are not handed out again.
func (s *Store) Pending(ctx context.Context, pending []any, fn func(g *graph.Graph, tx *graph.Tx) error) ([]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, fmt.Errorf("store is read-only after an I/O failure: %w", s.failed)
	}
	tx := s.g.Begin()
	defer func() {
		next, nextVP := s.g.IDCounters()
		tx.Rollback()
		s.g.KeepIDCounters(next, nextVP)
	}()
	for _, op := range pending {
		if err := s.g.ApplyTx(tx, op); err != nil {
			return nil, &ConflictError{Err: err}
		}
	}
	mark := len(tx.Ops())
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("internal error: %v", p)
			}
		}()
		err = fn(s.g, tx)
	}()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return append([]any(nil), tx.Ops()[mark:]...), nil
}

// Commit applies a transaction's operations as one durable write.
func (s *Store) Commit(ctx context.Context, ops []any) error {
	if len(ops) == 0 {
		return nil
	}
	return s.Write(ctx, func(g *graph.Graph, tx *graph.Tx) error {
		for _, op := range ops {
			if err := g.ApplyTx(tx, op); err != nil {
				return &ConflictError{Err: err}
			}
		}
		return nil
	})
}
