package server_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/worldgate/worldgate/services/graphd/server"
)

// graphd serves Go's profiles on its listen address only when started with -pprof.
func TestProfilesOnlyWithPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv, err := server.New(server.Config{Listen: "127.0.0.1:0", Pprof: on})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + srv.Addr() + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[on]; resp.StatusCode != want {
			t.Errorf("pprof %v: /debug/pprof/ answered %d, want %d", on, resp.StatusCode, want)
		}
		_ = srv.Close(context.Background())
	}
}
