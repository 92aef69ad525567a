// Sends of the ali-ons (Node) producer, for bench/broker_clients.py: 1 KiB bodies with a tag and a key, WINDOW sends
// in flight (1: await each; 32: a window of 32 promises, a new send started as each one settles), WARMUP sends
// first (the route lookup, the connection, the JIT), then COUNT timed ones. Prints one line:
//   RESULT inflight=W ok=N fail=N msgs_per_s=X p50_ms=Y p99_ms=Z
// usage: NODE_PATH=<folder with ali-ons>/node_modules node send_bench.js NAMESRV TOPIC WINDOW COUNT WARMUP
'use strict';
const { Producer, Message } = require('ali-ons');
const [namesrv, topic, window, count, warmup] = process.argv.slice(2).map((a, i) => (i < 2 ? a : Number(a)));
const BODY = Buffer.from('0123456789abcdef'.repeat(64)); // 1 KiB, the body bench/broker.py sends

function message() {
  const msg = new Message(topic, 'TagA', BODY);
  msg.keys = ['k'];
  return msg;
}

// `total` sends, `inflight` at a time; the latency of each that succeeded (ms) and the failures
async function sends(producer, total, inflight) {
  const lat = [];
  let started = 0;
  let fail = 0;
  async function lane() {
    while (started < total) {
      started++;
      const a = process.hrtime.bigint();
      try {
        const r = await producer.send(message());
        if (r.sendStatus === 'SEND_OK') lat.push(Number(process.hrtime.bigint() - a) / 1e6);
        else if (!fail++) console.error(`first failed send: ${r.sendStatus}`);
      } catch (err) {
        if (!fail++) console.error(`first failed send: ${err && err.stack || err}`);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(inflight, total) }, lane));
  return { lat, fail };
}

function pct(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : 0;
}

async function main() {
  // nameSrv given, ali-ons never asks an HTTP name-server lookup; its options check still wants an httpclient
  const producer = new Producer({ httpclient: {}, nameSrv: namesrv, producerGroup: `PG_bench_node_${topic}` });
  await producer.ready();
  await sends(producer, Math.max(1, warmup), window);
  const t0 = process.hrtime.bigint();
  const { lat, fail } = await sends(producer, count, window);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  await producer.close();
  lat.sort((x, y) => x - y);
  console.log(`RESULT inflight=${window} ok=${lat.length} fail=${fail} msgs_per_s=${(lat.length / seconds).toFixed(1)} ` +
              `p50_ms=${pct(lat, 0.5).toFixed(3)} p99_ms=${pct(lat, 0.99).toFixed(3)}`);
  process.exit(0);
}
main().catch(err => { console.error(err); process.exit(1); });
