//! Who may do what: identities from memcached's ASCII authentication, access rules per
//! identity, and the limits that stop one small request from costing a lot (keys per multi-get,
//! bytes of one reply).
//!
//! - [`authfile`]: the users of a `memcached -Y` auth file.
//! - [`login`]: the `set` that carries `user password`, read as memcached reads it.
//! - [`check`]: the one decision per parsed request, before routing, shared by both engines.
//! - [`throttle`]: failed password checks (logins, `/metrics` credentials) counted per peer
//!   address and slowed down.
//!
//! [`Access`] holds the policy in force (replaced whole by a reload: the auth file and the rules
//! are read again on SIGHUP) and the counters of what was refused; each client session keeps a
//! [`Guard`]: its identity and the rule that applies to it, refreshed when the policy changes.

pub mod authfile;
pub mod check;
pub mod login;
pub mod throttle;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use memrelay_protocol::{ErrorReply, Request};

use crate::settings::access_rules::{Rule, Rules};
use crate::settings::AccessSettings;
use authfile::Users;
use check::Denial;
use login::Login;
use throttle::Throttle;

/// Why a request was refused (a label of `memrelay_access_denied_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A request before logging in.
    Unauthenticated,
    /// A login that failed (wrong user or password, a malformed token).
    AuthFailure,
    /// A key outside the identity's prefixes.
    KeyPrefix,
    /// A write by a read-only identity.
    ReadOnly,
    /// An admin command not granted.
    Admin,
    /// A retrieval over `--max-keys-per-get`.
    TooManyKeys,
    /// A reply over `--max-reply-bytes`.
    ReplyTooLarge,
    /// A scrape of `/metrics` without valid credentials.
    MetricsAuth,
    /// A TLS client whose handshake failed (no or a bad certificate, not TLS) or did not finish
    /// in time.
    TlsHandshake,
}

impl Reason {
    pub const ALL: [Reason; 9] = [
        Reason::Unauthenticated,
        Reason::AuthFailure,
        Reason::KeyPrefix,
        Reason::ReadOnly,
        Reason::Admin,
        Reason::TooManyKeys,
        Reason::ReplyTooLarge,
        Reason::MetricsAuth,
        Reason::TlsHandshake,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Unauthenticated => "unauthenticated",
            Reason::AuthFailure => "auth_failure",
            Reason::KeyPrefix => "key_prefix",
            Reason::ReadOnly => "read_only",
            Reason::Admin => "admin",
            Reason::TooManyKeys => "too_many_keys",
            Reason::ReplyTooLarge => "reply_too_large",
            Reason::MetricsAuth => "metrics_auth",
            Reason::TlsHandshake => "tls_handshake",
        }
    }
}

/// Refusals by reason and logins, for the whole process: every engine thread counts into them
/// (the reply limit is applied where replies are built, deep in the shared relay code).
static DENIED: [AtomicU64; Reason::ALL.len()] = [const { AtomicU64::new(0) }; Reason::ALL.len()];
static LOGINS: AtomicU64 = AtomicU64::new(0);
/// `--max-reply-bytes` in force (process-wide for the same reason; a reload changes it).
static MAX_REPLY_BYTES: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Times a client's pipeline was left waiting at `--max-in-flight` (memcached's name for the
/// like of its `-R` limit: `conn_yields`).
static YIELDS: AtomicU64 = AtomicU64::new(0);

pub fn count_yield() {
    YIELDS.fetch_add(1, Ordering::Relaxed);
}

pub fn yields() -> u64 {
    YIELDS.load(Ordering::Relaxed)
}

/// Requests refused for `reason` since start.
pub fn denied(reason: Reason) -> u64 {
    DENIED[reason as usize].load(Ordering::Relaxed)
}

/// Successful logins since start.
pub fn logins() -> u64 {
    LOGINS.load(Ordering::Relaxed)
}

/// The most bytes one client reply may hold.
#[inline]
pub fn max_reply_bytes() -> usize {
    MAX_REPLY_BYTES.load(Ordering::Relaxed)
}

/// Counts a refusal and logs it, at most one line a second for the whole process (the others are
/// counted into the next line), so a client hammering at a closed door cannot flood the log.
pub fn count_denial(reason: Reason, who: &str, what: &str) {
    DENIED[reason as usize].fetch_add(1, Ordering::Relaxed);
    static LOG: crate::log_limit::OncePerSecond = crate::log_limit::OncePerSecond::new();
    let Some(others) = LOG.admit() else { return };
    let others = if others > 0 { format!(" ({others} more refused since the last line)") } else { String::new() };
    eprintln!("memrelay: access denied ({}): {who}: {what}{others}", reason.name());
}

/// The policy in force: users (when connections must log in), rules, limits.
#[derive(Debug)]
pub struct Policy {
    number: u64,
    users: Option<Users>,
    rules: Rules,
    max_keys_per_get: usize,
    max_reply_bytes: usize,
    metrics_users: Option<Users>,
    /// Identities also come from client certificates.
    certificates: bool,
    /// Nothing is checked: no login, every rule allows everything, no key limit.
    open: bool,
}

impl Policy {
    /// The policy `settings` describe (the auth file is read now).
    pub fn build(settings: &AccessSettings, number: u64) -> Result<Policy, String> {
        let users = settings.auth_file.as_deref().map(Users::load).transpose()?;
        if let (Some(users), Some(path)) = (&users, &settings.auth_file) {
            for warning in users.unusable() {
                eprintln!("memrelay: warning: auth file {}: {warning}", path.display());
            }
        }
        let rules = Rules::new(&settings.rules, users.is_some() || settings.certificate_identities)?;
        let max_keys_per_get = settings.max_keys_per_get.unwrap_or(usize::MAX);
        let open = users.is_none()
            && rules.identities().next().is_none()
            && rules.for_identity(None).allows_everything()
            && max_keys_per_get == usize::MAX;
        let max_reply_bytes = settings.max_reply_bytes.unwrap_or(usize::MAX);
        let metrics_users = settings.metrics_auth_file.as_deref().map(Users::load).transpose()?;
        let certificates = settings.certificate_identities;
        Ok(Policy { number, users, rules, max_keys_per_get, max_reply_bytes, metrics_users, certificates, open })
    }

    /// How a scrape carrying `authorization` (the HTTP header's value, if any) from `peer` is let
    /// through: always without `--metrics-auth-file`, else only with `Basic <base64 of
    /// user:password>` for one of its users (RFC 7617; the password is what follows the first
    /// `:`). As for logins, `throttle` decides before the password is looked at, and a wrong one
    /// takes one of the address's checks.
    pub fn metrics_scrape(
        &self,
        authorization: Option<&[u8]>,
        peer: Option<IpAddr>,
        throttle: &Throttle,
        now: Instant,
    ) -> Scrape {
        let Some(users) = &self.metrics_users else { return Scrape::Allowed };
        let Some((decoded, colon)) = authorization.and_then(basic_credentials) else { return Scrape::NoCredentials };
        if !throttle.may_check(peer, now) {
            return Scrape::Throttled;
        }
        match users.check(&decoded[..colon], &decoded[colon + 1..]) {
            Some(_) => Scrape::Allowed,
            None => Scrape::Refused { failures: throttle.failed(peer, now) },
        }
    }

    /// Whether nothing is checked (no login, no rule, no key limit).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// One line saying what is in force (start-up and reload logs).
    pub fn describe(&self) -> String {
        let mut identities: Vec<&str> = self.rules.identities().collect();
        identities.sort_unstable();
        let rules = if identities.is_empty() { "none".into() } else { identities.join(", ") };
        let certificates = if self.certificates { "; client certificates name identities" } else { "" };
        match &self.users {
            Some(users) => format!("{} users must log in{certificates}; rules for {rules}", users.len()),
            None if self.certificates => format!("client certificates name identities; rules for {rules}"),
            None if self.open => "no authentication, no access rules".into(),
            None => "no authentication; the `*` rule and limits apply to every connection".into(),
        }
    }
}

/// How a scrape of `/metrics` is let through ([`Policy::metrics_scrape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scrape {
    /// Served (credentials of a user, or none asked).
    Allowed,
    /// No basic credentials (none, another scheme, not base64, no `:`): no password checked.
    NoCredentials,
    /// Its address is out of password checks: refused unchecked.
    Throttled,
    /// Wrong credentials; `failures`: the address's lately.
    Refused { failures: u64 },
}

/// The `user:password` bytes of a basic `Authorization` value and where its first `:` is.
fn basic_credentials(value: &[u8]) -> Option<(Vec<u8>, usize)> {
    use base64::Engine;
    let value = value.trim_ascii();
    let encoded = value.get(..6).filter(|scheme| scheme.eq_ignore_ascii_case(b"basic ")).map(|_| &value[6..])?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim_ascii()).ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded, colon))
}

/// The policy in force, shared by every thread, and its replacement on reload.
#[derive(Debug)]
pub struct Access {
    number: AtomicU64,
    policy: RwLock<Arc<Policy>>,
}

impl Access {
    pub fn new(settings: &AccessSettings) -> Result<Access, String> {
        let policy = Policy::build(settings, 1)?;
        MAX_REPLY_BYTES.store(policy.max_reply_bytes, Ordering::Relaxed);
        Ok(Access { number: AtomicU64::new(1), policy: RwLock::new(Arc::new(policy)) })
    }

    pub fn get(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The policy `settings` describe, to put in force next (the auth file is read again now);
    /// the error says what is wrong with it, and nothing changes.
    pub fn prepare(&self, settings: &AccessSettings) -> Result<Policy, String> {
        Policy::build(settings, self.number.load(Ordering::Acquire) + 1)
    }

    /// Puts a prepared policy in force. Connections logged in stay logged in (as with
    /// memcached's reload of its auth file), under their identity's new rule.
    pub fn publish(&self, policy: Policy) {
        let number = policy.number;
        MAX_REPLY_BYTES.store(policy.max_reply_bytes, Ordering::Relaxed);
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
        self.number.store(number, Ordering::Release);
    }
}

/// One connection's side of access control: who it is and the policy it was judged under.
#[derive(Debug)]
pub struct Guard {
    policy: Arc<Policy>,
    /// The user it logged in as.
    user: Option<Arc<str>>,
    /// The rule for `user` under `policy` (shared with every connection it applies to).
    rule: Arc<Rule>,
    /// Failed password checks on this connection ([`throttle::MAX_PER_CONNECTION`]).
    failures: u32,
}

impl Guard {
    pub fn new(access: &Access) -> Guard {
        let policy = access.get();
        let rule = policy.rules.for_identity(None).clone();
        Guard { policy, user: None, rule, failures: 0 }
    }

    /// Picks up a newer policy (one atomic load when there is none).
    #[inline]
    fn refresh(&mut self, access: &Access) {
        if access.number.load(Ordering::Relaxed) != self.policy.number {
            self.policy = access.get();
            self.rule = self.policy.rules.for_identity(self.user.as_deref().map(str::as_bytes)).clone();
        }
    }

    /// Whether anything is checked at all (no login, no rule, no limit: memrelay as without
    /// access control, at the cost of one atomic load per request).
    #[inline]
    pub fn open(&mut self, access: &Access) -> bool {
        self.refresh(access);
        self.policy.open
    }

    /// Before logging in (when the policy asks for it): what the connection's next bytes are
    /// answered, as memcached `-Y` answers them. `None` once logged in or when no login is asked.
    /// Beyond memcached, failed logins are counted per peer and throttled ([`throttle::LOGINS`]):
    /// the throttle decides before the password is looked at, so an address out of checks is
    /// refused whatever it sent, and only its own failures can put it there.
    pub fn login(&mut self, pending: &[u8], peer: Option<SocketAddr>) -> Option<LoginStep> {
        let policy = Arc::clone(&self.policy);
        let users = policy.users.as_ref()?;
        if self.user.is_some() {
            return None;
        }
        let ip = peer.map(|p| p.ip());
        let now = Instant::now();
        let refuse = |reason, text, what: String, consumed, close| {
            count_denial(reason, &peer_name(peer), &what);
            LoginStep::Answer { reply: ErrorReply::Client(text), consumed, close }
        };
        Some(match login::login(pending) {
            Login::Wait => LoginStep::Wait,
            Login::Close => LoginStep::Close,
            Login::Refuse { reason: text, consumed } => {
                let reason = if text == login::UNAUTHENTICATED { Reason::Unauthenticated } else { Reason::AuthFailure };
                refuse(reason, text, format!("answered CLIENT_ERROR {text}"), consumed, false)
            }
            Login::Credentials { consumed, .. } if !throttle::LOGINS.may_check(ip, now) => {
                let what = format!(
                    "answered CLIENT_ERROR {} unchecked and closed: this address failed too often (throttled)",
                    login::FAILURE
                );
                refuse(Reason::AuthFailure, login::FAILURE, what, consumed, true)
            }
            Login::Credentials { user, password, consumed } => match users.check(user, password) {
                Some(user) => {
                    self.log_in(String::from_utf8_lossy(user).into());
                    LoginStep::Answer { reply: ErrorReply::Line(login::STORED), consumed, close: false }
                }
                None => {
                    let failures = throttle::LOGINS.failed(ip, now);
                    self.failures += 1;
                    let close = self.failures >= throttle::MAX_PER_CONNECTION;
                    let mut what =
                        format!("answered CLIENT_ERROR {} ({failures} from this address lately)", login::FAILURE);
                    if close {
                        what.push_str(&format!(" and closed ({} failed logins on the connection)", self.failures));
                    }
                    refuse(Reason::AuthFailure, login::FAILURE, what, consumed, close)
                }
            },
        })
    }

    /// The connection's TLS client certificate named `identity`: it is logged in as that
    /// identity, as after a login (no ASCII login is asked of it).
    pub fn certified(&mut self, identity: Arc<str>) {
        self.log_in(identity);
    }

    /// The connection is `user` from now on, under its rule; counted as a login.
    fn log_in(&mut self, user: Arc<str>) {
        LOGINS.fetch_add(1, Ordering::Relaxed);
        self.rule = self.policy.rules.for_identity(Some(user.as_bytes())).clone();
        self.user = Some(user);
    }

    /// The access check of a parsed request ([`check::check`]); a refusal is counted and logged.
    pub fn check(&self, request: &Request, buf: &[u8], peer: impl Fn() -> String) -> Result<(), Denial> {
        check::check(&self.rule, self.policy.max_keys_per_get, request, buf).inspect_err(|denial| {
            let who = match &self.user {
                Some(user) => format!("{user} from {}", peer()),
                None => peer(),
            };
            count_denial(denial.reason, &who, request.command.name());
        })
    }
}

/// What to do with an unauthenticated connection's bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum LoginStep {
    Wait,
    Close,
    /// Answer `reply`, consume `consumed` bytes; `close`: then close the connection (too many
    /// failed logins).
    Answer {
        reply: ErrorReply,
        consumed: usize,
        close: bool,
    },
}

/// A peer address for log lines.
pub fn peer_name(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "a client".to_string(), |p| p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_take_basic_credentials_of_a_listed_user() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scrapers");
        std::fs::write(&file, "prometheus:s3:cret\n").unwrap();
        let settings = AccessSettings { metrics_auth_file: Some(file), ..AccessSettings::default() };
        let policy = Policy::build(&settings, 1).unwrap();
        let basic = |credentials: &str| {
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials)).into_bytes()
        };
        let now = Instant::now();
        // Each case from an address of its own: the throttle is another test's.
        let mut next = 0u32;
        let mut scrape = |authorization: Option<&[u8]>| {
            next += 1;
            let peer = Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + next)));
            policy.metrics_scrape(authorization, peer, &Throttle::new(), now)
        };
        // The password is everything after the first colon (RFC 7617).
        assert_eq!(scrape(Some(&basic("prometheus:s3:cret"))), Scrape::Allowed);
        assert_eq!(
            scrape(Some(
                format!("basic  {}", &String::from_utf8(basic("prometheus:s3:cret")).unwrap()[6..]).as_bytes()
            )),
            Scrape::Allowed
        );
        for refused in [basic("prometheus:s3"), basic("other:s3:cret")] {
            assert_eq!(
                scrape(Some(&refused)),
                Scrape::Refused { failures: 1 },
                "{}",
                String::from_utf8_lossy(&refused)
            );
        }
        // No password to check: nothing taken from the address.
        for missing in [basic("prometheus"), b"Basic !!!".to_vec(), b"Bearer x".to_vec()] {
            assert_eq!(scrape(Some(&missing)), Scrape::NoCredentials, "{}", String::from_utf8_lossy(&missing));
        }
        assert_eq!(scrape(None), Scrape::NoCredentials);
        // Without the option, every scrape is answered (and the rest of the policy is open).
        let open = Policy::build(&AccessSettings::default(), 1).unwrap();
        assert_eq!(open.metrics_scrape(None, None, &Throttle::new(), now), Scrape::Allowed);
        assert!(open.open);
    }

    #[test]
    fn wrong_metrics_credentials_are_throttled_per_address() {
        use base64::Engine;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scrapers");
        std::fs::write(&file, "prometheus:pw\n").unwrap();
        let settings = AccessSettings { metrics_auth_file: Some(file), ..AccessSettings::default() };
        let policy = Policy::build(&settings, 1).unwrap();
        let basic = |credentials: &str| {
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(credentials)).into_bytes()
        };
        let (right, wrong) = (basic("prometheus:pw"), basic("prometheus:guess"));
        let throttle = Throttle::new();
        let now = Instant::now();
        let guesser = Some(IpAddr::from([192, 0, 2, 1]));
        let verdicts: Vec<Scrape> =
            (0..20).map(|_| policy.metrics_scrape(Some(&wrong), guesser, &throttle, now)).collect();
        let refused = verdicts.iter().filter(|v| matches!(v, Scrape::Refused { .. })).count();
        assert_eq!(refused, throttle::BURST as usize, "{verdicts:?}");
        assert_eq!(throttle.throttled(), 20 - u64::from(throttle::BURST));
        // The guessing address is refused unchecked, the right password too; another is served.
        assert_eq!(policy.metrics_scrape(Some(&right), guesser, &throttle, now), Scrape::Throttled);
        assert_eq!(
            policy.metrics_scrape(Some(&right), Some(IpAddr::from([192, 0, 2, 2])), &throttle, now),
            Scrape::Allowed
        );
        // One check more a second later.
        assert_eq!(policy.metrics_scrape(Some(&right), guesser, &throttle, now + throttle::REFILL), Scrape::Allowed);
    }
}
