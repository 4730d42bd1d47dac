package traversal

import (
	"math"
	"math/big"
)

// Correctly rounded sin, cos and tan for math(): Go's math.Sin can be one
// unit in the last place away from the value Java's Math.sin gives (sin(2)
// is 0.9092974268256817 in Java, 0.9092974268256816 from math.Sin); the
// value computed with 256 bits and rounded once is what Java gives. The
// argument is reduced by a 300-bit pi, so |x| up to 2^60 stays exact; beyond
// that (and for NaN, infinities) Go's functions answer.

const trigPrec = 320

var bigHalfPi = func() *big.Float {
	pi, _, err := big.ParseFloat("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895493038196", 10, trigPrec, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	return pi.Quo(pi, big.NewFloat(2).SetPrec(trigPrec))
}()

// sinCos returns sin(x) and cos(x) to trigPrec bits.
func sinCos(x float64) (sin, cos *big.Float) {
	bx := new(big.Float).SetPrec(trigPrec).SetFloat64(x)
	// k = round(x / (pi/2)); r = x - k*pi/2, |r| <= pi/4
	q := new(big.Float).SetPrec(trigPrec).Quo(bx, bigHalfPi)
	qf, _ := q.Float64()
	k := math.Round(qf)
	bk := new(big.Float).SetPrec(trigPrec).SetFloat64(k)
	r := new(big.Float).SetPrec(trigPrec).Mul(bk, bigHalfPi)
	r.Sub(bx, r)
	s, c := series(r)
	switch int64(math.Mod(k, 4)+4) % 4 {
	case 1:
		s, c = c, s.Neg(s)
	case 2:
		s, c = s.Neg(s), c.Neg(c)
	case 3:
		s, c = c.Neg(c), s
	}
	return s, c
}

// series computes sin(r) and cos(r) by their Taylor series.
func series(r *big.Float) (sin, cos *big.Float) {
	r2 := new(big.Float).SetPrec(trigPrec).Mul(r, r)
	sin = new(big.Float).SetPrec(trigPrec).Set(r)
	cos = new(big.Float).SetPrec(trigPrec).SetInt64(1)
	ts := new(big.Float).SetPrec(trigPrec).Set(r)
	tc := new(big.Float).SetPrec(trigPrec).SetInt64(1)
	eps := new(big.Float).SetMantExp(big.NewFloat(1), -trigPrec)
	for n := int64(1); n < 200; n++ {
		// ts *= -r²/((2n)(2n+1)); tc *= -r²/((2n-1)(2n))
		ts.Mul(ts, r2)
		ts.Quo(ts, new(big.Float).SetPrec(trigPrec).SetInt64(-(2*n)*(2*n+1)))
		tc.Mul(tc, r2)
		tc.Quo(tc, new(big.Float).SetPrec(trigPrec).SetInt64(-(2*n-1)*(2*n)))
		sin.Add(sin, ts)
		cos.Add(cos, tc)
		if new(big.Float).Abs(ts).Cmp(eps) < 0 && new(big.Float).Abs(tc).Cmp(eps) < 0 {
			break
		}
	}
	return sin, cos
}

func exactTrig(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) && math.Abs(x) < 1<<60 }

func javaSin(x float64) float64 {
	if !exactTrig(x) || x == 0 {
		return math.Sin(x)
	}
	s, _ := sinCos(x)
	f, _ := s.Float64()
	return f
}

func javaCos(x float64) float64 {
	if !exactTrig(x) {
		return math.Cos(x)
	}
	_, c := sinCos(x)
	f, _ := c.Float64()
	return f
}

func javaTan(x float64) float64 {
	if !exactTrig(x) || x == 0 {
		return math.Tan(x)
	}
	s, c := sinCos(x)
	f, _ := s.Quo(s, c).Float64()
	return f
}
