// @platformatic/kafka against a broker: produce, consume in a group (classic, then KIP-848 "consumer") with
// manual commits (a second member resumes from them), and a consume-transform-produce transaction (the
// consumed offset committed in it; one committed, one aborted) read back read_committed. Prints one JSON line.
// Usage: node platformatic_roundtrip.mjs BOOTSTRAP
import { Admin, Consumer, Producer, stringSerializers, stringDeserializers, FetchIsolationLevels } from '@platformatic/kafka'

const bootstrapBrokers = [process.argv[2]]
const clientId = 'platformatic-roundtrip'
const TOPIC = 'pf-in'
const OUT = 'pf-out'

// Consume with a group until `until(values)` holds, committing each message by hand.
async function consumeInGroup (groupId, topic, until, extra = {}) {
  const consumer = new Consumer({ clientId, bootstrapBrokers, groupId, deserializers: stringDeserializers, ...extra })
  const stream = await consumer.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest',
    autocommit: false, maxWaitTime: 200 })
  const values = []
  for await (const message of stream) {
    values.push(message.value)
    await message.commit()
    if (until(values)) break
  }
  await stream.close()
  await consumer.close()
  return values
}

async function committedTotal (admin, groupId, topic) {
  const [group] = await admin.listConsumerGroupOffsets({ groups: [{ groupId, topics: [{ name: topic, partitionIndexes: [0, 1, 2] }] }] })
  let sum = 0n
  for (const t of group.topics) for (const p of t.partitions) if (p.committedOffset > 0n) sum += p.committedOffset
  return Number(sum)
}

async function main () {
  const admin = new Admin({ clientId, bootstrapBrokers })
  await admin.createTopics({ topics: [TOPIC], partitions: 3, replicas: 1 })
  await admin.createTopics({ topics: [OUT], partitions: 1, replicas: 1 })
  const producer = new Producer({ clientId, bootstrapBrokers, serializers: stringSerializers })
  await producer.send({ messages: Array.from({ length: 30 }, (_, i) => ({ topic: TOPIC, key: `k${i}`, value: `v${i}` })) })

  const first = await consumeInGroup('pf-group', TOPIC, v => v.length === 30)
  const committedFirst = await committedTotal(admin, 'pf-group', TOPIC)
  await producer.send({ messages: Array.from({ length: 10 }, (_, i) => ({ topic: TOPIC, key: `m${i}`, value: `w${i}` })) })
  const second = await consumeInGroup('pf-group', TOPIC, v => v.length === 10)
  const committedSecond = await committedTotal(admin, 'pf-group', TOPIC)
  const consumerProtocol = await consumeInGroup('pf-group-848', TOPIC, v => v.length === 40, { groupProtocol: 'consumer' })
  await producer.close()

  // Consume-transform-produce: the transaction carries the output and the input offsets of its group. Five are
// committed and one aborted: one, because this client's read_committed filter keeps a single aborted range per
// producer per fetch response (a Map keyed by producer id), so a second abort in the same response leaks through.
  const txProducer = new Producer({ clientId, bootstrapBrokers, serializers: stringSerializers,
    idempotent: true, transactionalId: 'pf-tx' })
  const source = new Consumer({ clientId, bootstrapBrokers, groupId: 'pf-txn-group', deserializers: stringDeserializers })
  const stream = await source.consume({ topics: [TOPIC], mode: 'committed', fallbackMode: 'earliest', autocommit: false, maxWaitTime: 200 })
  let seen = 0
  for await (const message of stream) {
    seen += 1
    const commit = seen <= 5
    const txn = await txProducer.beginTransaction()
    await txn.send({ messages: [{ topic: OUT, value: (commit ? 'c' : 'a') + message.value }] })
    await txn.addConsumer(source)
    await txn.addOffset(message)
    if (commit) await txn.commit(); else await txn.abort()
    if (seen === 6) break
  }
  await stream.close()
  await source.close()
  const last = await txProducer.beginTransaction()
  await last.send({ messages: [{ topic: OUT, value: 'end' }] })
  await last.commit()
  await txProducer.close()

  const readCommitted = await consumeInGroup('pf-reader', OUT, v => v.includes('end'),
    { isolationLevel: FetchIsolationLevels.READ_COMMITTED })
  const txnCommitted = await committedTotal(admin, 'pf-txn-group', TOPIC)
  await admin.close()
  console.log(JSON.stringify({
    first: first.length, firstDistinct: new Set(first).size, committedFirst,
    second: second.sort(), committedSecond, consumerProtocol: new Set(consumerProtocol).size,
    readCommitted: readCommitted.map(v => v[0]), txnCommitted
  }))
}

const deadline = setTimeout(() => { console.error('platformatic_roundtrip: timed out after 90 s'); process.exit(2) }, 90000)
main().then(() => { clearTimeout(deadline) }, err => { console.error(`platformatic_roundtrip: ${err.stack || err}`); process.exit(1) })
