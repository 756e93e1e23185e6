//! Loss models: independent (Bernoulli) loss and the Gilbert-Elliott chain.

use crate::rng::Rng;

/// Gilbert-Elliott parameters, as netem's `loss gemodel p r 1-h 1-k`:
/// `p` good->bad, `r` bad->good per frame; a frame is lost with `1-k` in the
/// good state and `1-h` in the bad state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GilbertElliott {
    pub p: f64,
    pub r: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// The simple Gilbert model with a mean loss `loss` (0..1) that comes in
    /// bursts of `burst` frames on average: every frame in the bad state is lost.
    pub fn from_burst(loss: f64, burst: f64) -> Self {
        let r = 1.0 / burst.max(1.0);
        let p = if loss >= 1.0 { 1.0 } else { (loss * r / (1.0 - loss)).min(1.0) };
        GilbertElliott { p, r, loss_good: 0.0, loss_bad: 1.0 }
    }

    /// Long-run share of lost frames.
    pub fn stationary_loss(&self) -> f64 {
        if self.p + self.r == 0.0 {
            return self.loss_good;
        }
        let bad = self.p / (self.p + self.r);
        bad * self.loss_bad + (1.0 - bad) * self.loss_good
    }
}

#[derive(Clone, Debug)]
pub enum LossModel {
    None,
    Random(f64),
    Ge { params: GilbertElliott, bad: bool },
}

impl LossModel {
    /// Whether the next frame is lost; advances the chain by one frame.
    pub fn lose(&mut self, rng: &mut Rng) -> bool {
        match self {
            LossModel::None => false,
            LossModel::Random(p) => rng.chance(*p),
            LossModel::Ge { params, bad } => {
                let flip = if *bad { params.r } else { params.p };
                if rng.chance(flip) {
                    *bad = !*bad;
                }
                rng.chance(if *bad { params.loss_bad } else { params.loss_good })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measure(model: &mut LossModel, n: usize) -> (f64, f64) {
        let mut rng = Rng::new(42);
        let (mut lost, mut bursts, mut prev) = (0usize, 0usize, false);
        for _ in 0..n {
            let l = model.lose(&mut rng);
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        (lost as f64 / n as f64, lost as f64 / bursts.max(1) as f64)
    }

    #[test]
    fn random_loss_rate() {
        let (rate, _) = measure(&mut LossModel::Random(0.01), 1_000_000);
        assert!((rate - 0.01).abs() < 0.0005, "{rate}");
    }

    #[test]
    fn gilbert_burst_has_stationary_loss_and_mean_burst() {
        let params = GilbertElliott::from_burst(0.02, 4.0);
        assert!((params.stationary_loss() - 0.02).abs() < 1e-12);
        let (rate, burst) = measure(&mut LossModel::Ge { params, bad: false }, 2_000_000);
        assert!((rate - 0.02).abs() < 0.001, "loss {rate}");
        assert!((burst - 4.0).abs() < 0.2, "burst {burst}");
    }

    #[test]
    fn full_ge_matches_stationary_formula() {
        let params = GilbertElliott { p: 0.05, r: 0.3, loss_good: 0.01, loss_bad: 0.6 };
        let (rate, _) = measure(&mut LossModel::Ge { params, bad: false }, 2_000_000);
        assert!((rate - params.stationary_loss()).abs() < 0.002, "{rate}");
    }
}
