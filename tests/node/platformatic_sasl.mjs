// @platformatic/kafka logging in with SASL (PLAIN, or OAUTHBEARER with Kafka's unsecured token) and producing for a
// while: with a short connections.max.reauth.ms on the broker it re-authenticates (KIP-368) on its connections.
// Prints one JSON line. Usage: node platformatic_sasl.mjs BOOTSTRAP plain|oauthbearer MILLISECONDS
import { Producer, stringSerializers } from '@platformatic/kafka'

const [bootstrap, mechanism, duration] = process.argv.slice(2)

function unsecuredToken (principal) { // Kafka's unsecured JWS: alg none, sub, iat, exp, no signature
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url')
  const now = Date.now() / 1000
  return `${part({ alg: 'none' })}.${part({ sub: principal, iat: now, exp: now + 3600 })}.`
}

const sasl = mechanism === 'plain'
  ? { mechanism: 'PLAIN', username: 'alice', password: 'alice-secret' }
  : { mechanism: 'OAUTHBEARER', token: unsecuredToken('alice') }

async function main () {
  const producer = new Producer({ clientId: 'platformatic-sasl', bootstrapBrokers: [bootstrap], sasl,
    serializers: stringSerializers, autocreateTopics: true })
  const end = Date.now() + Number(duration)
  let sent = 0
  while (Date.now() < end) {
    await producer.send({ messages: [{ topic: `pf-sasl-${mechanism}`, value: `m${sent}` }] })
    sent += 1
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  await producer.close()
  console.log(JSON.stringify({ sent }))
}

const deadline = setTimeout(() => { console.error('platformatic_sasl: timed out after 90 s'); process.exit(2) }, 90000)
main().then(() => { clearTimeout(deadline) }, err => { console.error(`platformatic_sasl: ${err.stack || err}`); process.exit(1) })
