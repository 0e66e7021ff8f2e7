import java.io.BufferedOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.security.Security;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

import org.bouncycastle.asn1.ASN1ObjectIdentifier;
import org.bouncycastle.cms.CMSAlgorithm;
import org.bouncycastle.cms.CMSEnvelopedDataGenerator;
import org.bouncycastle.cms.CMSEnvelopedDataStreamGenerator;
import org.bouncycastle.cms.CMSProcessableByteArray;
import org.bouncycastle.cms.jcajce.JceCMSContentEncryptorBuilder;
import org.bouncycastle.cms.jcajce.JceKeyTransRecipientInfoGenerator;
import org.bouncycastle.jce.provider.BouncyCastleProvider;
import org.bouncycastle.operator.OutputEncryptor;

/**
 * An AS2 partner's encryption step, done the way the Java AS2 products do it: BouncyCastle's CMS
 * enveloped-data generator with an AES-GCM content encryptor and RSA key transport. BouncyCastle puts
 * AES-GCM inside a plain EnvelopedData (GCMParameters in the algorithm identifier, the tag appended to
 * the ciphertext), not in the RFC 5083 AuthEnvelopedData; this program exists so the receiver is tested
 * against those real bytes rather than against our idea of them.
 *
 *   java -cp 'lib/<version>/*:lib/<version>/classes' GcmMessage AES128_GCM|AES192_GCM|AES256_GCM recipient.pem [stream|buffered] < entity > message.p7m
 *
 * stdin is the MIME entity to encrypt; stdout is the BER/DER ContentInfo (the body of an
 * application/pkcs7-mime; smime-type=enveloped-data message). "stream" (the default) is
 * CMSEnvelopedDataStreamGenerator, which BouncyCastle's SMIMEEnvelopedGenerator uses underneath (BER,
 * indefinite lengths); "buffered" is CMSEnvelopedDataGenerator (DER).
 */
public final class GcmMessage {
  public static void main(String[] args) throws Exception {
    if (args.length < 2 || args.length > 3) {
      System.err.println("usage: GcmMessage AES128_GCM|AES192_GCM|AES256_GCM recipient-cert.pem [stream|buffered] < entity > message");
      System.exit(2);
    }
    ASN1ObjectIdentifier algorithm = switch (args[0]) {
      case "AES128_GCM" -> CMSAlgorithm.AES128_GCM;
      case "AES192_GCM" -> CMSAlgorithm.AES192_GCM;
      case "AES256_GCM" -> CMSAlgorithm.AES256_GCM;
      default -> throw new IllegalArgumentException("unknown content cipher " + args[0]);
    };
    String mode = args.length == 3 ? args[2] : "stream";
    Security.addProvider(new BouncyCastleProvider());

    X509Certificate recipient;
    try (InputStream in = new FileInputStream(args[1])) {
      recipient = (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
    }
    byte[] content = System.in.readAllBytes();
    OutputEncryptor encryptor = new JceCMSContentEncryptorBuilder(algorithm).setProvider("BC").build();
    JceKeyTransRecipientInfoGenerator recipientInfo = new JceKeyTransRecipientInfoGenerator(recipient).setProvider("BC");

    OutputStream out = new BufferedOutputStream(System.out);
    switch (mode) {
      case "stream" -> {
        CMSEnvelopedDataStreamGenerator generator = new CMSEnvelopedDataStreamGenerator();
        generator.addRecipientInfoGenerator(recipientInfo);
        try (OutputStream sealed = generator.open(out, encryptor)) {
          sealed.write(content);
        }
      }
      case "buffered" -> {
        CMSEnvelopedDataGenerator generator = new CMSEnvelopedDataGenerator();
        generator.addRecipientInfoGenerator(recipientInfo);
        out.write(generator.generate(new CMSProcessableByteArray(content), encryptor).getEncoded());
      }
      default -> throw new IllegalArgumentException("unknown mode " + mode + " (stream or buffered)");
    }
    out.flush();
  }
}
