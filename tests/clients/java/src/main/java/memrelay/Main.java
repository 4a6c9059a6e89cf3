package memrelay;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * spymemcached or xmemcached driven the way an application would, printing a JSON summary on
 * stdout; the same modes and summary as the Go, Node and Python programs beside this one (see
 * tests/clients/README.md). Run: java -cp target/classes:target/lib/* memrelay.Main
 * --lib spymemcached|xmemcached --addr HOST:PORT --mode script|load|probe.
 */
public final class Main {
  /** One library behind one blocking interface. */
  interface Lib {
    boolean set(String k, String v) throws Exception;
    String get(String k) throws Exception;
    Map<String, String> getMulti(Collection<String> ks) throws Exception;
    boolean delete(String k) throws Exception;
    boolean add(String k, String v) throws Exception;
    boolean replace(String k, String v) throws Exception;
    long incr(String k, long n) throws Exception;
    long decr(String k, long n) throws Exception;
    long gets(String k) throws Exception; // the cas token, -1 on a miss
    String cas(String k, String v, long token) throws Exception;
    boolean touch(String k, int exp) throws Exception;
    void close() throws Exception;
  }

  static final AtomicInteger RECONNECTS = new AtomicInteger();
  static final AtomicInteger CONNECTS = new AtomicInteger();

  static Lib spy(String addr) throws IOException {
    net.spy.memcached.ConnectionFactory f = new net.spy.memcached.ConnectionFactoryBuilder()
        .setProtocol(net.spy.memcached.ConnectionFactoryBuilder.Protocol.TEXT)
        .setOpTimeout(1000)
        .setMaxReconnectDelay(1)
        .setInitialObservers(List.of(new net.spy.memcached.ConnectionObserver() {
          public void connectionEstablished(SocketAddress sa, int reconnectCount) {
            if (CONNECTS.getAndIncrement() > 0) RECONNECTS.incrementAndGet();
          }
          public void connectionLost(SocketAddress sa) {}
        }))
        .build();
    net.spy.memcached.MemcachedClient c =
        new net.spy.memcached.MemcachedClient(f, net.spy.memcached.AddrUtil.getAddresses(addr));
    return new Lib() {
      public boolean set(String k, String v) throws Exception { return c.set(k, 0, v).get(); }
      public String get(String k) { Object o = c.get(k); return o == null ? null : o.toString(); }
      public Map<String, String> getMulti(Collection<String> ks) {
        Map<String, String> m = new TreeMap<>();
        c.getBulk(ks).forEach((k, v) -> m.put(k, v.toString()));
        return m;
      }
      public boolean delete(String k) throws Exception { return c.delete(k).get(); }
      public boolean add(String k, String v) throws Exception { return c.add(k, 0, v).get(); }
      public boolean replace(String k, String v) throws Exception { return c.replace(k, 0, v).get(); }
      public long incr(String k, long n) { return c.incr(k, n); }
      public long decr(String k, long n) { return c.decr(k, n); }
      public long gets(String k) { net.spy.memcached.CASValue<Object> v = c.gets(k); return v == null ? -1 : v.getCas(); }
      public String cas(String k, String v, long t) { return c.cas(k, t, v).toString(); }
      public boolean touch(String k, int exp) throws Exception { return c.touch(k, exp).get(); }
      public void close() { c.shutdown(1, TimeUnit.SECONDS); }
    };
  }

  static Lib xmem(String addr) throws IOException {
    net.rubyeye.xmemcached.XMemcachedClientBuilder b =
        new net.rubyeye.xmemcached.XMemcachedClientBuilder(net.rubyeye.xmemcached.utils.AddrUtil.getAddresses(addr));
    b.setConnectTimeout(1000);
    b.setOpTimeout(1000);
    b.setHealSessionInterval(100);
    b.setStateListeners(List.of(new net.rubyeye.xmemcached.MemcachedClientStateListener() {
      public void onStarted(net.rubyeye.xmemcached.MemcachedClient c) {}
      public void onShutDown(net.rubyeye.xmemcached.MemcachedClient c) {}
      public void onConnected(net.rubyeye.xmemcached.MemcachedClient c, InetSocketAddress a) {
        if (CONNECTS.getAndIncrement() > 0) RECONNECTS.incrementAndGet();
      }
      public void onDisconnected(net.rubyeye.xmemcached.MemcachedClient c, InetSocketAddress a) {}
      public void onException(net.rubyeye.xmemcached.MemcachedClient c, Throwable t) {}
    }));
    net.rubyeye.xmemcached.MemcachedClient c = b.build();
    return new Lib() {
      public boolean set(String k, String v) throws Exception { return c.set(k, 0, v); }
      public String get(String k) throws Exception { Object o = c.get(k); return o == null ? null : o.toString(); }
      public Map<String, String> getMulti(Collection<String> ks) throws Exception {
        Map<String, String> m = new TreeMap<>();
        Map<String, Object> got = c.get(ks);
        if (got != null) got.forEach((k, v) -> m.put(k, v.toString()));
        return m;
      }
      public boolean delete(String k) throws Exception { return c.delete(k); }
      public boolean add(String k, String v) throws Exception { return c.add(k, 0, v); }
      public boolean replace(String k, String v) throws Exception { return c.replace(k, 0, v); }
      public long incr(String k, long n) throws Exception { return c.incr(k, n); }
      public long decr(String k, long n) throws Exception { return c.decr(k, n); }
      public long gets(String k) throws Exception { net.rubyeye.xmemcached.GetsResponse<Object> r = c.gets(k); return r == null ? -1 : r.getCas(); }
      public String cas(String k, String v, long t) throws Exception { return Boolean.toString(c.cas(k, 0, v, t)); }
      public boolean touch(String k, int exp) throws Exception { return c.touch(k, exp); }
      public void close() throws Exception { c.shutdown(); }
    };
  }

  static String mode;
  static int ops, ok;
  static final Map<String, Integer> errors = new TreeMap<>();
  static final List<String> answers = new ArrayList<>();
  static final Map<String, String> reads = new TreeMap<>();
  static final Object ERR = new Object();

  static String kind(Throwable e) {
    while (e.getCause() != null && e instanceof java.util.concurrent.ExecutionException) e = e.getCause();
    String n = e.getClass().getSimpleName();
    String m = String.valueOf(e.getMessage()).toLowerCase();
    if (n.contains("Timeout") || m.contains("timed out") || m.contains("timeout")) return "timeout";
    if (m.contains("cancelled")) return "cancelled";
    return n;
  }

  static Object call(String what, Callable<Object> fn) {
    ops++;
    try {
      Object r = fn.call();
      ok++;
      if ("script".equals(mode)) answers.add(what + ": " + r);
      return r;
    } catch (Throwable e) {
      String k = kind(e);
      errors.merge(k, 1, Integer::sum);
      if ("script".equals(mode)) answers.add(what + ": error " + k);
      return ERR;
    }
  }

  static String key(String prefix, int i) { return prefix + "k" + i; }

  static void script(Lib m, String p) {
    for (int i = 0; i < 20; i++) { int j = i; call("set " + key(p, i), () -> m.set(key(p, j), "v" + j)); }
    for (int i = 0; i < 22; i++) {
      int j = i;
      Object v = call("get " + key(p, i), () -> m.get(key(p, j)));
      if (v instanceof String) reads.put(key(p, i), (String) v);
    }
    List<String> ks = new ArrayList<>();
    for (int i = 0; i < 25; i += 2) ks.add(key(p, i));
    call("getmulti", () -> m.getMulti(ks));
    call("delete k3", () -> m.delete(key(p, 3)));
    call("delete k3 again", () -> m.delete(key(p, 3)));
    call("get k3 after delete", () -> m.get(key(p, 3)));
    call("add k3", () -> m.add(key(p, 3), "added"));
    call("add k4 (exists)", () -> m.add(key(p, 4), "x"));
    call("replace k30 (missing)", () -> m.replace(key(p, 30), "x"));
    call("set counter", () -> m.set(key(p, 100), "10"));
    call("incr counter 5", () -> m.incr(key(p, 100), 5));
    call("decr counter 20", () -> m.decr(key(p, 100), 20));
    call("incr missing", () -> m.incr(key(p, 101), 1));
    long[] tok = {-1}; // the cas token differs between servers: the answer says only if there is one
    call("gets k5 (token found)", () -> (tok[0] = m.gets(key(p, 5))) >= 0);
    if (tok[0] >= 0) {
      long token = tok[0];
      call("cas k5 fresh", () -> m.cas(key(p, 5), "cas1", token));
      call("cas k5 stale", () -> m.cas(key(p, 5), "cas2", token));
    }
    Object v = call("get k5", () -> m.get(key(p, 5)));
    if (v instanceof String) reads.put(key(p, 5), (String) v);
    call("touch k6", () -> m.touch(key(p, 6), 100));
    call("touch missing", () -> m.touch(key(p, 31), 100));
    call("set 2 MiB", () -> m.set(key(p, 40), "x".repeat(2 << 20)));
  }

  static final Map<String, Long> ackedAt = new TreeMap<>();
  static int staleReads;
  static final Map<String, Integer> acked = new TreeMap<>();
  static final Map<String, List<String>> attempted = new TreeMap<>();
  static final Map<Long, long[]> buckets = new TreeMap<>();

  /** For `seconds`, or until it has done `maxOps` operations when that is not 0. */
  static void load(Lib m, String p, int nkeys, double seconds, int maxOps) throws InterruptedException {
    long deadline = System.nanoTime() + (long) (seconds * 1e9);
    int seq = 0;
    while (System.nanoTime() < deadline && (maxOps == 0 || seq < maxOps)) {
      int i = seq % nkeys;
      String k = key(p, i);
      int op = (seq + seq / nkeys) % 10; // shifts each round: every key sees every op
      Object r;
      String v = null;
      if (op <= 3) {
        String val = k + "#" + seq;
        v = val;
        attempted.computeIfAbsent(k, x -> new ArrayList<>()).add(val);
        r = call("", () -> m.set(k, val));
      } else if (op == 9) {
        attempted.computeIfAbsent(k, x -> new ArrayList<>()).add("");
        r = call("", () -> m.delete(k));
      } else if (op == 5) {
        List<String> ks = List.of(k, key(p, (i + 1) % nkeys), key(p, (i + 2) % nkeys));
        r = call("", () -> m.getMulti(ks));
      } else {
        r = call("", () -> m.get(k));
        if (r instanceof String) reads.put(k, (String) r);
        String read = r instanceof String ? (String) r : "";
        if (r != ERR && acked.containsKey(k) && !attempted.get(k).subList(acked.get(k), attempted.get(k).size()).contains(read)) {
          staleReads++; // older than the key's last acknowledged write (a miss included)
        }
      }
      boolean good = r != ERR && !(op <= 3 && !Boolean.TRUE.equals(r));
      if (good && (op <= 3 || op == 9)) {
        acked.put(k, attempted.get(k).size() - 1); // its index in attempted
        ackedAt.put(k, System.currentTimeMillis());
      }
      seq++;
      long b = System.currentTimeMillis() / 100 * 100;
      long[] bucket = buckets.computeIfAbsent(b, x -> new long[] {x, 0, 0});
      bucket[good ? 1 : 2]++;
      if (!good) Thread.sleep(1); // an application would not spin on a failing call
    }
  }

  static void probe(Lib m, String p) {
    for (int i = 0; i < 2; i++) {
      ops++;
      try {
        answers.add("returned " + m.set(p + "probe", "v"));
      } catch (Throwable e) {
        Throwable c = e.getCause() != null ? e.getCause() : e;
        answers.add("raised " + e.getClass().getSimpleName() + " (" + c.getClass().getSimpleName() + ": " + c.getMessage() + ")");
      }
    }
  }

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new LinkedHashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
    String lib = a.getOrDefault("lib", "spymemcached");
    String addr = a.getOrDefault("addr", "127.0.0.1:11211");
    mode = a.getOrDefault("mode", "script");
    String prefix = a.getOrDefault("prefix", "java:");
    Lib m = "xmemcached".equals(lib) ? xmem(addr) : spy(addr);
    long start = System.nanoTime();
    switch (mode) {
      case "script": script(m, prefix); break;
      case "load": load(m, prefix, Integer.parseInt(a.getOrDefault("keys", "50")), Double.parseDouble(a.getOrDefault("seconds", "3")),
          Integer.parseInt(a.getOrDefault("ops", "0"))); break;
      case "probe": probe(m, prefix); break;
      default: throw new IllegalArgumentException("unknown --mode " + mode);
    }
    double secs = (System.nanoTime() - start) / 1e9;
    StringBuilder o = new StringBuilder();
    o.append("{\"client\":").append(q(lib)).append(",\"mode\":").append(q(mode));
    o.append(",\"ops\":").append(ops).append(",\"ok\":").append(ok);
    o.append(",\"errors\":").append(obj(errors));
    o.append(",\"reconnects\":").append(RECONNECTS.get());
    o.append(",\"seconds\":").append(secs).append(",\"throughput\":").append(secs > 0 ? ops / secs : 0);
    o.append(",\"reads\":").append(obj(reads));
    if (!answers.isEmpty()) o.append(",\"answers\":").append(arr(answers));
    if ("load".equals(mode)) {
      o.append(",\"acked\":").append(obj(acked));
      o.append(",\"stale_reads\":").append(staleReads);
      StringBuilder aa = new StringBuilder("{");
      ackedAt.forEach((k, t) -> aa.append(aa.length() > 1 ? "," : "").append(q(k)).append(':').append(t));
      o.append(",\"acked_at\":").append(aa).append('}');
      StringBuilder at = new StringBuilder("{");
      attempted.forEach((k, vs) -> at.append(at.length() > 1 ? "," : "").append(q(k)).append(':').append(arr(vs)));
      o.append(",\"attempted\":").append(at).append('}');
      StringBuilder tl = new StringBuilder("[");
      buckets.values().forEach(b -> tl.append(tl.length() > 1 ? "," : "").append('[').append(b[0]).append(',').append(b[1]).append(',').append(b[2]).append(']'));
      o.append(",\"timeline\":").append(tl).append(']');
    }
    o.append('}');
    System.out.println(o);
    System.out.flush();
    // No orderly shutdown: xmemcached's takes seconds, and the summary is already out.
    System.exit(0);
  }

  static String q(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      if (ch == '"' || ch == '\\') b.append('\\').append(ch);
      else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
      else b.append(ch);
    }
    return b.append('"').toString();
  }

  static String obj(Map<String, ?> m) {
    StringBuilder b = new StringBuilder("{");
    m.forEach((k, v) -> b.append(b.length() > 1 ? "," : "").append(q(k)).append(':').append(v instanceof Integer ? v.toString() : q((String) v)));
    return b.append('}').toString();
  }

  static String arr(List<String> l) {
    StringBuilder b = new StringBuilder("[");
    l.forEach(s -> b.append(b.length() > 1 ? "," : "").append(q(s)));
    return b.append(']').toString();
  }
}
