// The cryptography one AS2 message of bench:as2 costs, alone, in a loop on one core of this process: the
// RSA key transport (a private operation), AES-256-CBC over the content, SHA-256 of the signed part, the
// partner signature's verification (a public operation) and the MDN signature (a private operation). No
// HTTP, MIME, DER, log or evidence. Its rate scales with the machine's crypto as our receiver's does, so the
// receiver's rate ÷ this one says how much of a message is the rest, whatever the CPU's RSA instructions.
const { constants, createCipheriv, createDecipheriv, createHash, createPrivateKey, createPublicKey, createSecretKey, privateDecrypt, publicEncrypt, randomBytes, sign, verify } = require('node:crypto');
const { readFileSync } = require('node:fs');

function cryptoFloor({ receiver, partner }, contentBytes, seconds = 2) {
  const receiverKey = createPrivateKey(readFileSync(receiver.key));
  const partnerKey = createPrivateKey(readFileSync(partner.key));
  const partnerPublic = createPublicKey(readFileSync(partner.cert));
  const block = Buffer.concat([Buffer.from([0, 2]), randomBytes(221).map((b) => b || 1), Buffer.from([0]), randomBytes(32)]);
  const wrapped = publicEncrypt({ key: createPublicKey(readFileSync(receiver.cert)), padding: constants.RSA_NO_PADDING }, block);
  const iv = randomBytes(16);
  const content = createCipheriv('aes-256-cbc', createSecretKey(block.subarray(224)), iv).update(randomBytes(contentBytes));
  const signedPart = randomBytes(contentBytes - 1024);
  const partnerSignature = sign('sha256', signedPart, partnerKey);
  const message = () => {
    const key = privateDecrypt({ key: receiverKey, padding: constants.RSA_NO_PADDING }, wrapped).subarray(224);
    createDecipheriv('aes-256-cbc', createSecretKey(key), iv).setAutoPadding(false).update(content);
    const digest = createHash('sha256').update(signedPart).digest();
    if (!verify('sha256', signedPart, partnerPublic, partnerSignature)) throw new Error('verify failed');
    sign('sha256', digest, receiverKey);
  };
  for (let i = 0; i < 50; i++) message();
  const until = process.hrtime.bigint() + BigInt(seconds * 1e9);
  let count = 0;
  const started = process.hrtime.bigint();
  while (process.hrtime.bigint() < until) { message(); count++; }
  return count / (Number(process.hrtime.bigint() - started) / 1e9);
}

module.exports = { cryptoFloor };
