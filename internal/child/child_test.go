package child_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outflowhq/outflow/internal/child"
)

func TestWaitReady_ReportsAChildThatExitsBeforeItIsReady(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		ready func() error
	}{
		// A child that could not bind its port exits while whoever holds
		// the port may answer: neither is this child being ready.
		{"never ready", func() error { return errors.New("connection refused") }},
		{"answered by someone else", func() error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := child.Start(exec.Command("sh", "-c", "exit 3"))
			require.NoError(t, err)
			<-p.Exited() // the child has gone before the first check
			err = p.WaitReady(context.Background(), time.Minute, time.Millisecond, tt.ready)
			require.ErrorIs(t, err, child.ErrExited)
		})
	}
}

func TestWaitReady_AcceptsALiveChildThatAnswers(t *testing.T) {
	t.Parallel()
	p, err := child.Start(exec.Command("sleep", "60"))
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(time.Second) })
	calls := 0
	err = p.WaitReady(context.Background(), time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
}

func TestListen_HoldsThePortUntilClosed(t *testing.T) {
	t.Parallel()
	f, port, err := child.Listen()
	require.NoError(t, err)
	_, err = net.Listen("tcp", "127.0.0.1:"+port)
	require.Error(t, err, "port %s was free for another process to take", port)
	// It accepts: a client's connection waits on it until the child serves.
	conn, err := net.Dial("tcp", "127.0.0.1:"+port)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.NoError(t, f.Close())
}

func TestListening_TellsTheProcessThatHoldsAPortFromAnother(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	other, err := child.Start(exec.Command("sleep", "60"))
	require.NoError(t, err)
	t.Cleanup(func() { other.Stop(time.Second) })
	free, err := child.FreePort()
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		pid  int
		port string
		want bool
	}{
		{"this process on its port", os.Getpid(), port, true},
		{"another process on this process's port", other.Pid(), port, false},
		{"this process on a port nobody listens on", os.Getpid(), free, false},
	} {
		got, err := child.Listening(tc.pid, tc.port)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}
