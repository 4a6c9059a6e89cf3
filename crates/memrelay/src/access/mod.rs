//! Who may do what: identities from memcached's ASCII authentication, access rules per
//! identity, and the limits that stop one small request from costing a lot (keys per multi-get,
//! bytes of one reply).
//!
//! - [`authfile`]: the users of a `memcached -Y` auth file.
//! - [`login`]: the `set` that carries `user password`, read as memcached reads it.
//! - [`check`]: the one decision per parsed request, before routing, shared by both engines.
//! - [`throttle`]: failed logins counted per peer address and slowed down.
//!
//! [`Access`] holds the policy in force (replaced whole by a reload: the auth file and the rules
//! are read again on SIGHUP) and the counters of what was refused; each client session keeps a
//! [`Guard`]: its identity and the rule that applies to it, refreshed when the policy changes.

pub mod authfile;
pub mod check;
pub mod login;
pub mod throttle;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use memrelay_protocol::{ErrorReply, Request};

use crate::settings::access_rules::{Rule, Rules};
use crate::settings::AccessSettings;
use authfile::Users;
use check::Denial;
use login::Login;

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

    /// Whether a scrape carrying `authorization` (the HTTP header's value, if any) may read
    /// `/metrics`: always without `--metrics-auth-file`, else only with `Basic <base64 of
    /// user:password>` for one of its users (RFC 7617; the password is what follows the first `:`).
    pub fn metrics_allowed(&self, authorization: Option<&[u8]>) -> bool {
        use base64::Engine;
        let Some(users) = &self.metrics_users else { return true };
        let Some(value) = authorization else { return false };
        let value = value.trim_ascii();
        let Some(encoded) = value.get(..6).filter(|scheme| scheme.eq_ignore_ascii_case(b"basic ")).map(|_| &value[6..])
        else {
            return false;
        };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim_ascii()) else { return false };
        let Some(colon) = decoded.iter().position(|&b| b == b':') else { return false };
        users.check(&decoded[..colon], &decoded[colon + 1..]).is_some()
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
    /// Beyond memcached, failed logins are counted per peer and throttled ([`throttle`]).
    pub fn login(&mut self, pending: &[u8], peer: Option<SocketAddr>) -> Option<LoginStep> {
        let users = self.policy.users.as_ref()?;
        if self.user.is_some() {
            return None;
        }
        let ip = peer.map(|p| p.ip());
        Some(match login::login(pending, users) {
            Login::Wait => LoginStep::Wait,
            Login::Close => LoginStep::Close,
            // A password to check, from an address out of checks: refused unchecked, closed.
            Login::Answer {
                reply: login::Reply::Stored | login::Reply::ClientError(login::FAILURE), consumed, ..
            } if !throttle::may_check(ip, std::time::Instant::now()) => {
                let failures = throttle::failed(ip, std::time::Instant::now());
                let what = format!(
                    "answered CLIENT_ERROR {} unchecked and closed: {failures} failed logins from this address (throttled)",
                    login::FAILURE
                );
                count_denial(Reason::AuthFailure, &peer_name(peer), &what);
                LoginStep::Answer { reply: ErrorReply::Client(login::FAILURE), consumed, close: true }
            }
            Login::Answer { reply: login::Reply::Stored, consumed, user: Some(user) } => {
                self.log_in(String::from_utf8_lossy(user).into());
                LoginStep::Answer { reply: ErrorReply::Line(login::STORED), consumed, close: false }
            }
            Login::Answer { reply, consumed, .. } => {
                let (reason, text) = match reply {
                    login::Reply::ClientError(login::UNAUTHENTICATED) => {
                        (Reason::Unauthenticated, login::UNAUTHENTICATED)
                    }
                    login::Reply::ClientError(text) => (Reason::AuthFailure, text),
                    login::Reply::Stored => (Reason::AuthFailure, login::FAILURE),
                };
                let mut close = false;
                let mut what = format!("answered CLIENT_ERROR {text}");
                if text == login::FAILURE {
                    throttle::failed(ip, std::time::Instant::now());
                    self.failures += 1;
                    if self.failures >= throttle::MAX_PER_CONNECTION {
                        close = true;
                        what.push_str(&format!(" and closed ({} failed logins on the connection)", self.failures));
                    }
                }
                count_denial(reason, &peer_name(peer), &what);
                LoginStep::Answer { reply: ErrorReply::Client(text), consumed, close }
            }
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
        // The password is everything after the first colon (RFC 7617).
        assert!(policy.metrics_allowed(Some(&basic("prometheus:s3:cret"))));
        assert!(policy.metrics_allowed(Some(
            format!("basic  {}", &String::from_utf8(basic("prometheus:s3:cret")).unwrap()[6..]).as_bytes()
        )));
        for refused in [
            basic("prometheus:s3"),
            basic("prometheus"),
            basic("other:s3:cret"),
            b"Basic !!!".to_vec(),
            b"Bearer x".to_vec(),
        ] {
            assert!(!policy.metrics_allowed(Some(&refused)), "{}", String::from_utf8_lossy(&refused));
        }
        assert!(!policy.metrics_allowed(None));
        // Without the option, every scrape is answered (and the rest of the policy is open).
        let open = Policy::build(&AccessSettings::default(), 1).unwrap();
        assert!(open.metrics_allowed(None) && open.open);
    }
}
