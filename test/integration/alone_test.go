package integration

import "testing"

// TestAlone holds the tests that must not overlap the package's others, and
// runs them beside each other. Go runs a sequential test (with its parallel
// subtests) before it starts any parallel test, so these have the package to
// themselves for their first minute instead of one after the other:
//   - Demo and DemoAbort run `make demo`'s stories, which pace themselves by
//     the clock (traffic windows, a minute per Hello workflow) as a person
//     watching would, and ran out of their bounds beside four other tests;
//   - NotificationsFollowTheRollout takes the shared receivers down and
//     hangs them, so the notifications of busier tests would queue ahead
//     of its own. The two stories notify a handful of times.
func TestAlone(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Demo", testDemo},
		{"DemoAbort", testDemoAbort},
		{"NotificationsFollowTheRollout", testNotificationsFollowTheRollout},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}
