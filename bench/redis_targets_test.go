package main

import (
	"strings"
	"testing"
)

// redisResult is a Redis row whose sides measured ours/theirs of ns, p99
// and allocations as given, at each level.
func redisResult(name string, levels map[int][3]float64) result {
	r := result{row: row{suite: "Redis", name: name}}
	for _, c := range []int{1, 8, 64, 512} {
		x, ok := levels[c]
		if !ok {
			continue
		}
		r.levels = append(r.levels, level{callers: c, sides: []measured{
			{side: "moonpool", ours: true, ns: 1000 * x[0], p99: 1000 * x[1], allocs: 10 * x[2]},
			{side: "redis_rate", ns: 1000, p99: 1000, allocs: 10},
		}})
	}
	return r
}

// TestRedisTargetsJudgeTheirLines: each Redis line judges exactly its
// levels and rows: parity within 1.10× at 1 caller, 1.0× in time and p99
// from 8 callers on, 0.3× over many keys at 64 and 512 (not on the hot
// key), 0.5× on the hot key there, and allocations at every level.
func TestRedisTargetsJudgeTheirLines(t *testing.T) {
	good := map[int][3]float64{1: {1.08, 1.5, 0.9}, 8: {0.9, 0.95, 0.5}, 64: {0.2, 0.4, 0.2}, 512: {0.2, 0.3, 0.1}}
	verdicts := func(hot, many map[int][3]float64) map[string]bool {
		t.Helper()
		results := []result{redisResult("Allow, 1 key", hot), redisResult("Allow, 1 key over its limit", map[int][3]float64{1: {9, 9, 9}, 8: {9, 9, 9}}), redisResult("Allow, 10000 keys", many)}
		got := map[string]bool{}
		for _, c := range redisTargets(results) {
			if c.group != "Redis" || !c.known {
				continue
			}
			for _, word := range []string{"1 caller", "p99", "0.3×", "0.5×", "allocates", "1.0× redis_rate at 8"} {
				if strings.Contains(c.target, word) {
					got[word] = c.met
				}
			}
		}
		if len(got) != 6 {
			t.Fatalf("judged %v, want six lines", got)
		}
		return got
	}
	for word, met := range verdicts(good, good) {
		if !met {
			t.Errorf("line %q missed on a run within every bound", word)
		}
	}
	for _, c := range []struct {
		hot  bool
		at   int
		x    [3]float64
		line string
	}{
		{true, 1, [3]float64{1.2, 1, 1}, "1 caller"},
		{false, 8, [3]float64{1.05, 0.9, 0.5}, "1.0× redis_rate at 8"},
		{false, 512, [3]float64{0.2, 1.2, 0.1}, "p99"},
		{false, 64, [3]float64{0.35, 0.4, 0.2}, "0.3×"},
		{true, 512, [3]float64{0.6, 0.4, 0.2}, "0.5×"},
		{true, 8, [3]float64{0.9, 0.95, 1.2}, "allocates"},
	} {
		hot, many := cloneLevels(good), cloneLevels(good)
		if c.hot {
			hot[c.at] = c.x
		} else {
			many[c.at] = c.x
		}
		got := verdicts(hot, many)
		for word, met := range got {
			if met == (word == c.line) {
				t.Errorf("%v at %d callers (hot %v): line %q met=%v", c.x, c.at, c.hot, word, met)
			}
		}
	}
	// The hot key at 0.4× over 64 and 512 does not meet the many-keys line
	// by itself, nor spoil it.
	hot := cloneLevels(good)
	hot[64] = [3]float64{0.4, 0.4, 0.2}
	if got := verdicts(hot, good); !got["0.3×"] || !got["0.5×"] {
		t.Errorf("a hot key at 0.4× judged the many-keys line: %v", got)
	}
}

func cloneLevels(m map[int][3]float64) map[int][3]float64 {
	c := map[int][3]float64{}
	for k, v := range m {
		c[k] = v
	}
	return c
}
