package sim

import "testing"

// regressions are seeds of the default configuration that once found a bug
// of the model or of the protocol and must stay clean.
var regressions = []uint64{
	55, // the campaign read decided before waiting for the last stable offset (model bug, fixed)

	// The two races of the campaign's read-then-evaluate step, fixed by the
	// challenger outwaiting the fenced holder's lease before it leads. The
	// seeds showed them before InitProducerId was modelled to wait for a
	// completing transaction's markers, which changed their traces; they
	// are kept clean; outwaitSeeds show the races today.
	690,  // late markers: the partial view before the holder's transaction hid its committed renewal
	722,  // late markers, as 690
	1072, // late markers, as 690
	1216, // a pause between the read and the evaluation judged a stale view at a later instant
}

// quickRegressions are the regression seeds of quickConfig.
var quickRegressions = []uint64{
	169, // a pause between the read and the evaluation, as 1216
}

// outwaitSeeds are regressions of the default configuration that show a
// zombie dispatch when the challenger leads right after the fence
// (bugNoOutwait): it challenged on a view that did not show the newest
// lease committed before its InitProducerId landed (the markers were late
// and the partial view hid it, or a rival's first lease committed after the
// read). TestRegressions keeps them clean, and
// TestOutwaitSeeds checks that they still show the race without the rule.
// Seed 1172 was one until the standbys kept their stagger after a
// resignation: its rival challenged beside the first standby, and no
// longer does; 1490 took its place. Since a standby's read waits on the
// holder's own open transaction until a poll interval past the deadline and
// no longer, the race is rarer (the first of seeds 1 to 6,000 that shows it
// is 690), and these six show it.
var outwaitSeeds = []uint64{690, 1092, 2174, 2333, 2346, 2648}

// TestRegressions replays the kept regression seeds.
func TestRegressions(t *testing.T) {
	for _, set := range []struct {
		cfg   Config
		seeds []uint64
	}{{testConfig(t), regressions}, {testConfig(t), outwaitSeeds}, {quickConfig(t), quickRegressions}} {
		for _, seed := range set.seeds {
			res, err := Run(seed, set.cfg)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for _, v := range res.Violations {
				t.Errorf("seed %d: %s: %s\n\treplay: %s", seed, v.Class, v.Detail, replay(seed))
			}
		}
	}
}

// TestOutwaitSeeds replays the outwait seeds with the challenger leading
// right after the fence, and asserts that each still shows a zombie
// dispatch, so the regressions keep exercising the races the outwait closes.
func TestOutwaitSeeds(t *testing.T) {
	cfg := testConfig(t)
	cfg.bugNoOutwait = true
	for _, seed := range outwaitSeeds {
		res, err := Run(seed, cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		found := false
		for _, v := range res.Violations {
			found = found || v.Class == ZombieDispatch
		}
		if !found {
			t.Errorf("seed %d shows no %s without the outwait: find a seed that does", seed, ZombieDispatch)
		}
	}
}
