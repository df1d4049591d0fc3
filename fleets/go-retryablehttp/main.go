// SPDX-License-Identifier: Apache-2.0

// Command go-retryablehttp-fleet is an unmodified hashicorp/go-retryablehttp fleet: open-loop
// Poisson arrivals at -rate logical requests per second for -duration, spread round-robin over
// -clients clients, each one retryablehttp.NewClient() with the library's defaults (RetryMax 4,
// RetryWaitMin 1 s, RetryWaitMax 30 s, DefaultRetryPolicy, DefaultBackoff: 1, 2, 4, 8 s without
// jitter, Retry-After of a 429 or 503 honoured exactly) except two settings every deployment
// makes: HTTPClient.Timeout (the per-attempt time-out, -attempt-timeout) and Logger = nil (no
// log line per attempt). Only this load loop is ours.
//
// Attempts are counted with RequestLogHook (called by the library before each attempt), and
// each attempt's outcome with a CheckRetry that calls DefaultRetryPolicy and returns exactly what
// it returns: the library's behaviour is unchanged.
//
// Output: one JSON document (stdout, or -out FILE) with the run's settings and one record per
// logical request: arrival and end in ns since t = 0 (the instant the -start-url POST was
// answered, or the start), the final outcome and the attempts.
//
// Build (offline, against Debian's packaged sources; scripts/fleet-vs-serve does it):
//
//	GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= go build -o DIR/go-retryablehttp-fleet .
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
)

// requestState is what the hooks record for one logical request; it travels in the request's
// context, so one client's hooks can serve every request of that client.
type requestState struct {
	attempts   atomic.Int64
	timeouts   atomic.Int64 // attempts that ended by the per-attempt time-out
	transport  atomic.Int64 // attempts that ended by another transport error
	lastStatus atomic.Int64 // the status of the last answer, 0 when none came
	lastKind   atomic.Int64 // how the last attempt ended: kindStatus, kindTimeout, kindTransport
	retryAfter atomic.Int64 // answers that carried Retry-After
	pushback   atomic.Int64 // answers that carried grpc-retry-pushback-ms
}

const (
	kindNone = iota
	kindStatus
	kindTimeout
	kindTransport
)

type stateKey struct{}

func stateOf(ctx context.Context) *requestState {
	s, _ := ctx.Value(stateKey{}).(*requestState)
	return s
}

type record struct {
	ID         int    `json:"id"`
	Client     int    `json:"client"`
	ArrivalNs  int64  `json:"arrival_ns"`
	SentNs     int64  `json:"sent_ns"`
	EndNs      int64  `json:"end_ns"` // -1: still in flight when the run ended
	OK         bool   `json:"ok"`
	Outcome    string `json:"outcome"` // ok, status (a non-2xx answer), timeout, transport, cut
	Status     int    `json:"status"`
	Attempts   int64  `json:"attempts"`
	Timeouts   int64  `json:"attempt_timeouts"`
	Transport  int64  `json:"attempt_transport_errors"`
	RetryAfter int64  `json:"answers_with_retry_after"`
	Pushback   int64  `json:"answers_with_pushback"`
	Error      string `json:"error,omitempty"`
}

type output struct {
	Fleet          string   `json:"fleet"`
	BaseURL        string   `json:"base_url"`
	Rate           float64  `json:"rate"`
	DurationNs     int64    `json:"duration_ns"`
	Clients        int      `json:"clients"`
	Targets        string   `json:"targets"`
	AttemptTimeout string   `json:"attempt_timeout"`
	RetryMax       int      `json:"retry_max"`
	RetryWaitMin   string   `json:"retry_wait_min"`
	RetryWaitMax   string   `json:"retry_wait_max"`
	Seed           int64    `json:"seed"`
	StartedClock   bool     `json:"started_clock"`
	WallNs         int64    `json:"wall_ns"`
	Requests       []record `json:"requests"`
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func newClient(timeout time.Duration) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient.Timeout = timeout
	c.Logger = nil
	c.RequestLogHook = func(_ retryablehttp.Logger, req *http.Request, _ int) {
		if s := stateOf(req.Context()); s != nil {
			s.attempts.Add(1)
		}
	}
	policy := c.CheckRetry
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if s := stateOf(ctx); s != nil && ctx.Err() == nil {
			switch {
			case err != nil && isTimeout(err):
				s.timeouts.Add(1)
				s.lastKind.Store(kindTimeout)
			case err != nil:
				s.transport.Add(1)
				s.lastKind.Store(kindTransport)
			case resp != nil:
				s.lastStatus.Store(int64(resp.StatusCode))
				s.lastKind.Store(kindStatus)
				if resp.Header.Get("Retry-After") != "" {
					s.retryAfter.Add(1)
				}
				if resp.Header.Get("grpc-retry-pushback-ms") != "" {
					s.pushback.Add(1)
				}
			}
		}
		return policy(ctx, resp, err)
	}
	return c
}

func startClock(url string) error {
	resp, err := http.Post(url, "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: status %d", url, resp.StatusCode)
	}
	return nil
}

func run() error {
	base := flag.String("url", "", "the server's base URL, e.g. http://127.0.0.1:8080 (required)")
	rate := flag.Float64("rate", 200, "logical requests per second (Poisson arrivals), > 0")
	duration := flag.Duration("duration", 60*time.Second, "how long arrivals go on; what is in flight then is cut")
	clients := flag.Int("clients", 20, "retryablehttp clients, round-robin, >= 1")
	targets := flag.String("targets", "distinct", "distinct: GET /orders/<n> per logical request; identical: GET /")
	timeout := flag.Duration("attempt-timeout", time.Second, "http.Client.Timeout of every client (per attempt)")
	seed := flag.Int64("seed", 1, "the arrivals' random seed")
	startURL := flag.String("start-url", "", "POST this URL (serve's /control/start) at t = 0")
	out := flag.String("out", "-", "where the JSON goes (- = stdout)")
	flag.Parse()
	if flag.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	switch {
	case *base == "":
		return errors.New("-url is required")
	case !(*rate > 0):
		return fmt.Errorf("-rate must be > 0, got %v", *rate)
	case *duration <= 0:
		return fmt.Errorf("-duration must be > 0, got %v", *duration)
	case *clients < 1:
		return fmt.Errorf("-clients must be >= 1, got %d", *clients)
	case *targets != "distinct" && *targets != "identical":
		return fmt.Errorf("-targets must be distinct or identical, got %q", *targets)
	case *timeout <= 0:
		return fmt.Errorf("-attempt-timeout must be > 0, got %v", *timeout)
	}
	baseURL := strings.TrimRight(*base, "/")

	pool := make([]*retryablehttp.Client, *clients)
	for i := range pool {
		pool[i] = newClient(*timeout)
	}
	rng := rand.New(rand.NewSource(*seed))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if *startURL != "" {
		if err := startClock(*startURL); err != nil {
			return fmt.Errorf("starting the server's clock: %w", err)
		}
	}
	t0 := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	records := []record{}
	next := time.Duration(rng.ExpFloat64() / *rate * float64(time.Second))
	for id := 0; next < *duration; id++ {
		if d := time.Until(t0.Add(next)); d > 0 {
			time.Sleep(d)
		}
		arrival := next
		next += time.Duration(rng.ExpFloat64() / *rate * float64(time.Second))
		target := "/"
		if *targets == "distinct" {
			target = fmt.Sprintf("/orders/%d", id)
		}
		wg.Add(1)
		go func(id int, arrival time.Duration, target string) {
			defer wg.Done()
			st := &requestState{}
			rec := record{ID: id, Client: id % len(pool), ArrivalNs: int64(arrival),
				SentNs: int64(time.Since(t0)), EndNs: -1}
			req, err := retryablehttp.NewRequestWithContext(context.WithValue(ctx, stateKey{}, st),
				http.MethodGet, baseURL+target, nil)
			if err == nil {
				var resp *http.Response
				resp, err = pool[rec.Client].Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					rec.Status = resp.StatusCode
				}
			}
			end := time.Since(t0)
			rec.Attempts = st.attempts.Load()
			rec.Timeouts = st.timeouts.Load()
			rec.Transport = st.transport.Load()
			rec.RetryAfter = st.retryAfter.Load()
			rec.Pushback = st.pushback.Load()
			switch {
			case end >= *duration || (err != nil && ctx.Err() != nil):
				rec.Outcome = "cut" // still in flight, or waiting for a retry, when the run ended
			case err == nil && rec.Status >= 200 && rec.Status < 300:
				rec.OK, rec.Outcome, rec.EndNs = true, "ok", int64(end)
			case err == nil:
				rec.Outcome, rec.EndNs = "status", int64(end)
			default: // the library gave up: the last attempt says why
				rec.EndNs = int64(end)
				rec.Error = err.Error()
				switch st.lastKind.Load() {
				case kindStatus:
					rec.Outcome, rec.Status = "status", int(st.lastStatus.Load())
				case kindTimeout:
					rec.Outcome = "timeout"
				default:
					rec.Outcome = "transport"
				}
			}
			mu.Lock()
			records = append(records, rec)
			mu.Unlock()
		}(id, arrival, target)
	}
	if d := time.Until(t0.Add(*duration)); d > 0 {
		time.Sleep(d)
	}
	cancel() // the run ends: what is in flight, or waiting for its next attempt, is cut
	wg.Wait()
	wall := time.Since(t0)
	sort.Slice(records, func(i, j int) bool { return records[i].ID < records[j].ID })

	w := os.Stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	return enc.Encode(output{
		Fleet: "go-retryablehttp", BaseURL: baseURL, Rate: *rate, DurationNs: int64(*duration),
		Clients: *clients, Targets: *targets, AttemptTimeout: timeout.String(),
		RetryMax: pool[0].RetryMax, RetryWaitMin: pool[0].RetryWaitMin.String(),
		RetryWaitMax: pool[0].RetryWaitMax.String(), Seed: *seed, StartedClock: *startURL != "",
		WallNs: int64(wall), Requests: records,
	})
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "go-retryablehttp-fleet: %v\n", err)
		os.Exit(2)
	}
}
