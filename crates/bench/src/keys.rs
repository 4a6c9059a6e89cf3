//! Key choice: which key id a request asks for, per pattern, from a seeded generator; and
//! writing `<prefix><id>` into a buffer without `fmt`.

use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Normal, Zipf};
use serde::Serialize;

/// memtier's key patterns (`--key-pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// `R`: uniform over the range.
    Uniform,
    /// `S`: each client walks the whole range in order from its own starting point
    /// (client g of N starts at `min + g*n/N`), wrapping at the end; so N clients sending n/N
    /// requests each write every key exactly once.
    Sequential,
    /// `G`: normal around `--key-median` with `--key-stddev`, redrawn when outside the range.
    Gaussian,
    /// `Z`: zipf with exponent `--key-zipf-exp` over ranks 1..=n; rank r is key `min + r - 1`.
    Zipf,
}

impl Pattern {
    pub fn from_letter(letter: &str) -> Option<Pattern> {
        Some(match letter {
            "R" | "r" => Pattern::Uniform,
            "S" | "s" | "P" | "p" => Pattern::Sequential,
            "G" | "g" => Pattern::Gaussian,
            "Z" | "z" => Pattern::Zipf,
            _ => return None,
        })
    }
}

/// The parameters a chooser needs (shared by all clients).
#[derive(Debug, Clone, Copy)]
pub struct KeyRange {
    pub min: u64,
    /// Inclusive.
    pub max: u64,
    pub median: f64,
    pub stddev: f64,
    pub zipf_exp: f64,
}

impl KeyRange {
    pub fn count(&self) -> u64 {
        self.max - self.min + 1
    }
}

/// One client's key chooser for one pattern.
#[derive(Debug, Clone)]
pub struct KeyChooser {
    min: u64,
    max: u64,
    n: u64,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform,
    Sequential { next: u64 },
    Gaussian(Normal<f64>),
    Zipf(Zipf<f64>),
}

impl KeyChooser {
    /// `client` of `clients` sets the starting point of the sequential pattern.
    pub fn new(pattern: Pattern, range: &KeyRange, client: u64, clients: u64) -> KeyChooser {
        let n = range.count();
        let kind = match pattern {
            Pattern::Uniform => Kind::Uniform,
            Pattern::Sequential => Kind::Sequential { next: share_start(n, client, clients) },
            Pattern::Gaussian => {
                Kind::Gaussian(Normal::new(range.median, range.stddev).expect("validated: finite, not negative"))
            }
            Pattern::Zipf => Kind::Zipf(Zipf::new(n, range.zipf_exp).expect("validated: n >= 1, exponent > 0")),
        };
        KeyChooser { min: range.min, max: range.max, n, kind }
    }

    #[inline]
    pub fn next(&mut self, rng: &mut SmallRng) -> u64 {
        match &mut self.kind {
            Kind::Uniform => self.min + rng.gen_range(0..self.n),
            Kind::Sequential { next } => {
                let id = self.min + *next;
                *next += 1;
                if *next == self.n {
                    *next = 0;
                }
                id
            }
            Kind::Gaussian(normal) => {
                for _ in 0..64 {
                    let x = normal.sample(rng).round();
                    if x >= self.min as f64 && x <= self.max as f64 {
                        return x as u64;
                    }
                }
                // A median far outside the range: clamp rather than loop for ever.
                (normal.sample(rng).round().max(self.min as f64) as u64).min(self.max)
            }
            Kind::Zipf(zipf) => {
                let rank = zipf.sample(rng) as u64;
                self.min + rank.clamp(1, self.n) - 1
            }
        }
    }
}

/// First offset of client `client`'s share when `n` keys are split into `clients` contiguous
/// shares as evenly as possible.
pub fn share_start(n: u64, client: u64, clients: u64) -> u64 {
    (u128::from(n) * u128::from(client) / u128::from(clients.max(1))) as u64
}

/// Writes `prefix` then `id` in decimal.
#[inline]
pub fn write_key(out: &mut Vec<u8>, prefix: &[u8], id: u64) {
    out.extend_from_slice(prefix);
    write_u64(out, id);
}

/// Decimal digits of `value`, without going through `fmt`.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn range(min: u64, max: u64) -> KeyRange {
        let span = (max - min) as f64;
        KeyRange { min, max, median: (min + max) as f64 / 2.0, stddev: span / 6.0, zipf_exp: 1.0 }
    }

    #[test]
    fn decimal_digits() {
        for v in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
        let mut out = Vec::new();
        write_key(&mut out, b"memtier-", 42);
        assert_eq!(out, b"memtier-42");
    }

    #[test]
    fn every_pattern_stays_in_range() {
        let r = range(100, 199);
        for p in [Pattern::Uniform, Pattern::Sequential, Pattern::Gaussian, Pattern::Zipf] {
            let mut rng = SmallRng::seed_from_u64(3);
            let mut c = KeyChooser::new(p, &r, 0, 1);
            for _ in 0..10_000 {
                let id = c.next(&mut rng);
                assert!((100..=199).contains(&id), "{p:?} gave {id}");
            }
        }
    }

    #[test]
    fn sequential_shares_cover_the_range_once() {
        let r = range(10, 109);
        let clients = 7u64;
        let mut seen = vec![0u32; 100];
        for client in 0..clients {
            let mut rng = SmallRng::seed_from_u64(0);
            let mut c = KeyChooser::new(Pattern::Sequential, &r, client, clients);
            let share = share_start(100, client + 1, clients) - share_start(100, client, clients);
            for _ in 0..share {
                seen[(c.next(&mut rng) - 10) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn uniform_is_roughly_flat_and_zipf_is_skewed() {
        let r = range(0, 9);
        let mut rng = SmallRng::seed_from_u64(9);
        let mut uniform = KeyChooser::new(Pattern::Uniform, &r, 0, 1);
        let mut zipf = KeyChooser::new(Pattern::Zipf, &r, 0, 1);
        let (mut u, mut z) = ([0u32; 10], [0u32; 10]);
        for _ in 0..100_000 {
            u[uniform.next(&mut rng) as usize] += 1;
            z[zipf.next(&mut rng) as usize] += 1;
        }
        assert!(u.iter().all(|&c| (9_000..11_000).contains(&c)), "{u:?}");
        // Zipf s=1 over 10 ranks: P(1) = 1/H_10 = 0.3414, P(10) = 0.0341.
        assert!((33_000..35_300).contains(&z[0]), "{z:?}");
        assert!((3_000..3_900).contains(&z[9]), "{z:?}");
    }

    #[test]
    fn gaussian_centres_on_the_median() {
        let r = range(0, 6000);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut g = KeyChooser::new(Pattern::Gaussian, &r, 0, 1);
        let n = 50_000;
        let mean = (0..n).map(|_| g.next(&mut rng) as f64).sum::<f64>() / n as f64;
        assert!((mean - 3000.0).abs() < 30.0, "{mean}");
    }
}
