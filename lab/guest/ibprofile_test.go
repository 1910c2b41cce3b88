//go:build labguest

package guest

import "testing"

// ibProfiles are the firmware profiles of the simulated HCA (lab-ib
// profile): ibta is rdmavt's answers to every firmware-decided point, mlx5
// the mlx5 guesses that differ most from them (lab/ibsim/knob.c).
var ibProfiles = []string{"ibta", "mlx5"}

// useProfile sets the HCA's firmware profile for the rest of the test and
// puts the default (ibta) back at its end.
func useProfile(t testing.TB, profile string) {
	t.Helper()
	MustRun(t, "lab-ib", "profile", profile)
	t.Cleanup(func() { Run(t, "lab-ib", "profile", "ibta") })
}

// eachProfile runs f as one subtest per firmware profile.
func eachProfile(t *testing.T, f func(t *testing.T, profile string)) {
	for _, p := range ibProfiles {
		t.Run(p, func(t *testing.T) {
			useProfile(t, p)
			f(t, p)
		})
	}
}
