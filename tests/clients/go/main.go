// Command gomemcache-client drives a memcached (or memrelay) with bradfitz/gomemcache, the
// way an application would, and prints a JSON summary on stdout for tests/clients.
//
// Modes (-mode):
//
//	script: a fixed sequence of set/get/multi-get/delete/add/incr/cas; "answers" lists what
//	        each call returned, to compare memcached with memrelay.
//	load:   set/get/multi-get/delete in a loop for -seconds (or -ops operations, if fewer);
//	        ok/error counts per 100 ms bucket
//	        ("timeline") and the last acknowledged write of each key ("acked").
//	probe:  two sets against a server that answers one fixed line; what the library made of it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

type summary struct {
	Client     string              `json:"client"`
	Mode       string              `json:"mode"`
	Ops        int                 `json:"ops"`
	OK         int                 `json:"ok"`
	Errors     map[string]int      `json:"errors"`
	Reconnects *int                `json:"reconnects"`
	Seconds    float64             `json:"seconds"`
	Throughput float64             `json:"throughput"`
	Answers    []string            `json:"answers,omitempty"`
	Timeline   [][3]int64          `json:"timeline,omitempty"`
	Acked      map[string]int      `json:"acked,omitempty"` // key -> index in Attempted of its last acknowledged write
	Attempted  map[string][]string `json:"attempted,omitempty"`
	Reads      map[string]string   `json:"reads"`
	// Load mode: reads that returned something older than the key's last acknowledged write
	// (a miss where a value was acknowledged included), and when each key's last ack came.
	StaleReads int              `json:"stale_reads"`
	AckedAt    map[string]int64 `json:"acked_at,omitempty"`
}

type runner struct {
	mc *memcache.Client
	s  *summary
}

// kind names an error the way the summary counts it.
func kind(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, memcache.ErrCacheMiss):
		return "miss"
	case errors.Is(err, memcache.ErrNotStored):
		return "not_stored"
	case errors.Is(err, memcache.ErrCASConflict):
		return "exists"
	case errors.Is(err, memcache.ErrServerError):
		return "server_error"
	}
	var te *memcache.ConnectTimeoutError
	if errors.As(err, &te) {
		return "connect_timeout"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "timeout"):
		return "timeout"
	case strings.Contains(msg, "connection refused"):
		return "refused"
	case strings.Contains(msg, "unexpected response line"):
		return "unexpected_line"
	case strings.Contains(msg, "EOF"), strings.Contains(msg, "reset"), strings.Contains(msg, "broken pipe"):
		return "conn_closed"
	}
	return "other"
}

// answer records one call's outcome; expected outcomes (miss, not stored, exists) are answers,
// not errors.
func (r *runner) answer(what string, err error) {
	r.s.Ops++
	k := kind(err)
	switch k {
	case "ok", "miss", "not_stored", "exists":
		r.s.OK++
	default:
		r.s.Errors[k]++
		if r.s.Mode != "load" {
			what = what + " -> " + err.Error()
		}
	}
	if r.s.Mode == "script" {
		r.s.Answers = append(r.s.Answers, fmt.Sprintf("%s: %s", what, k))
	}
}

func (r *runner) script(prefix string) {
	mc, s := r.mc, r.s
	key := func(i int) string { return fmt.Sprintf("%sk%d", prefix, i) }
	for i := 0; i < 20; i++ {
		r.answer(fmt.Sprintf("set %s", key(i)), mc.Set(&memcache.Item{Key: key(i), Value: []byte(fmt.Sprintf("v%d", i)), Flags: uint32(i)}))
	}
	for i := 0; i < 22; i++ {
		it, err := mc.Get(key(i))
		what := fmt.Sprintf("get %s", key(i))
		if err == nil {
			what += fmt.Sprintf(" = %s flags %d", it.Value, it.Flags)
			s.Reads[key(i)] = string(it.Value)
		}
		r.answer(what, err)
	}
	keys := []string{}
	for i := 0; i < 25; i += 2 {
		keys = append(keys, key(i))
	}
	got, err := mc.GetMulti(keys)
	what := "getmulti"
	for _, k := range keys {
		if it, ok := got[k]; ok {
			what += fmt.Sprintf(" %s=%s", k, it.Value)
		} else {
			what += fmt.Sprintf(" %s=miss", k)
		}
	}
	r.answer(what, err)
	r.answer("delete k3", mc.Delete(key(3)))
	r.answer("delete k3 again", mc.Delete(key(3)))
	_, err = mc.Get(key(3))
	r.answer("get k3 after delete", err)
	r.answer("add k3", mc.Add(&memcache.Item{Key: key(3), Value: []byte("added")}))
	r.answer("add k4 (exists)", mc.Add(&memcache.Item{Key: key(4), Value: []byte("x")}))
	r.answer("replace k30 (missing)", mc.Replace(&memcache.Item{Key: key(30), Value: []byte("x")}))
	r.answer("set counter", mc.Set(&memcache.Item{Key: key(100), Value: []byte("10")}))
	n, err := mc.Increment(key(100), 5)
	r.answer(fmt.Sprintf("incr counter 5 = %d", n), err)
	n, err = mc.Decrement(key(100), 20)
	r.answer(fmt.Sprintf("decr counter 20 = %d", n), err)
	_, err = mc.Increment(key(101), 1)
	r.answer("incr missing", err)
	it, err := mc.Get(key(5))
	r.answer("gets k5", err)
	if err == nil {
		it.Value = []byte("cas1")
		r.answer("cas k5 fresh", mc.CompareAndSwap(it))
		it.Value = []byte("cas2")
		r.answer("cas k5 stale", mc.CompareAndSwap(it))
	}
	it, err = mc.Get(key(5))
	if err == nil {
		s.Reads[key(5)] = string(it.Value)
		r.answer(fmt.Sprintf("get k5 = %s", it.Value), err)
	} else {
		r.answer("get k5", err)
	}
	r.answer("touch k6", mc.Touch(key(6), 100))
	r.answer("touch missing", mc.Touch(key(31), 100))
	// A value larger than 1 MiB: memcached refuses it.
	r.answer("set 2 MiB", mc.Set(&memcache.Item{Key: key(40), Value: make([]byte, 2<<20)}))
}

// load runs set/get/multi-get/delete over -keys keys for -seconds, or until it has done maxOps
// operations when that is not 0; each key's writes carry a sequence number so a later check can
// tell which acknowledged write is the latest.
func (r *runner) load(prefix string, keys int, seconds float64, maxOps int) {
	s := r.s
	s.Acked = map[string]int{}
	s.Attempted = map[string][]string{}
	s.AckedAt = map[string]int64{}
	buckets := map[int64]*[3]int64{}
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	seq := 0
	for time.Now().Before(deadline) && (maxOps == 0 || seq < maxOps) {
		i := seq % keys
		k := fmt.Sprintf("%sk%d", prefix, i)
		var err error
		write := false
		// The op shifts by one each round over the keys, so every key sees every kind of op.
		switch (seq + seq/keys) % 10 {
		case 0, 1, 2, 3:
			v := fmt.Sprintf("%s#%d", k, seq)
			s.Attempted[k] = append(s.Attempted[k], v)
			err = r.mc.Set(&memcache.Item{Key: k, Value: []byte(v)})
			write = true
		case 9:
			s.Attempted[k] = append(s.Attempted[k], "")
			err = r.mc.Delete(k)
			if errors.Is(err, memcache.ErrCacheMiss) {
				err = nil
			}
			write = true
		case 5:
			ks := []string{k, fmt.Sprintf("%sk%d", prefix, (i+1)%keys), fmt.Sprintf("%sk%d", prefix, (i+2)%keys)}
			_, err = r.mc.GetMulti(ks)
		default:
			var it *memcache.Item
			it, err = r.mc.Get(k)
			read := ""
			if err == nil {
				read = string(it.Value)
				s.Reads[k] = read
			}
			if (err == nil || errors.Is(err, memcache.ErrCacheMiss)) && r.stale(k, read) {
				s.StaleReads++
			}
		}
		seq++
		if errors.Is(err, memcache.ErrCacheMiss) {
			err = nil
		}
		if err == nil && write {
			s.Acked[k] = len(s.Attempted[k]) - 1
			s.AckedAt[k] = time.Now().UnixMilli()
		}
		r.answer("", err)
		b := time.Now().UnixMilli() / 100 * 100
		if buckets[b] == nil {
			buckets[b] = &[3]int64{b, 0, 0}
		}
		if err == nil {
			buckets[b][1]++
		} else {
			buckets[b][2]++
			time.Sleep(time.Millisecond) // an application would not spin on a failing call
		}
	}
	for _, b := range buckets {
		s.Timeline = append(s.Timeline, *b)
	}
}

// stale: whether `read` ("" for a miss) is older than k's last acknowledged write.
func (r *runner) stale(k, read string) bool {
	i, ok := r.s.Acked[k]
	if !ok {
		return false
	}
	for _, v := range r.s.Attempted[k][i:] {
		if v == read {
			return false
		}
	}
	return true
}

// probe sends two sets to a server that answers every request with one fixed line.
func (r *runner) probe(prefix string) {
	for i := 0; i < 2; i++ {
		err := r.mc.Set(&memcache.Item{Key: prefix + "probe", Value: []byte("v")})
		k := "returned nil"
		if err != nil {
			k = fmt.Sprintf("error %s: %v", kind(err), err)
		}
		r.s.Ops++
		r.s.Answers = append(r.s.Answers, k)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:11211", "server host:port")
	mode := flag.String("mode", "script", "script, load or probe")
	prefix := flag.String("prefix", "go:", "key prefix")
	keys := flag.Int("keys", 50, "keys in load mode")
	seconds := flag.Float64("seconds", 3, "duration of load mode")
	ops := flag.Int("ops", 0, "load mode: stop after this many operations (0: none)")
	flag.Parse()
	mc := memcache.New(*addr)
	mc.Timeout = 1 * time.Second
	mc.MaxIdleConns = 4
	s := &summary{Client: "gomemcache", Mode: *mode, Errors: map[string]int{}, Reads: map[string]string{}}
	r := &runner{mc: mc, s: s}
	start := time.Now()
	switch *mode {
	case "script":
		r.script(*prefix)
	case "load":
		r.load(*prefix, *keys, *seconds, *ops)
	case "probe":
		r.probe(*prefix)
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	s.Seconds = time.Since(start).Seconds()
	if s.Seconds > 0 {
		s.Throughput = float64(s.Ops) / s.Seconds
	}
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
}
